"""HTTP made from the target itself: one request, many at once, and the readiness wait."""

from __future__ import annotations

import os
import time

from .common import AgentError, JsonObject, Workdir, check_name, check_seconds
from .processes import await_exit_record, state_of
from .procfs import tail

POLL_S = 0.05  # readiness poll period: start-up completion is noticed within ~100 ms
DEFAULT_READ_BYTES = 1 << 20  # a request that names no max_bytes gets its body's first MiB


def _request(
    method: str,
    url: str,
    body: str | None,
    headers: dict[str, str],
    timeout: float,
    max_bytes: int | None = None,
) -> tuple[int, str | None]:
    """(status, body); body None when the answer is longer than `max_bytes` (the read stops
    there, so a runaway body is never held). Without `max_bytes`: the first MiB."""
    import urllib.error  # lazy: urllib costs as much as the rest of the agent's start-up
    import urllib.request

    data = body.encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    limit = DEFAULT_READ_BYTES if max_bytes is None else max_bytes
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read(limit + 1)
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(limit + 1), exc.code
    if max_bytes is not None and len(raw) > limit:
        return status, None
    return status, raw[:limit].decode("utf-8", "replace")


def timed_out(exc: BaseException) -> bool:
    """The request got no answer in time (the connect, or a server that accepted and stayed
    silent), decided by the exception's type, never its text: socket.timeout / TimeoutError,
    or urllib's URLError whose reason is one."""
    import socket
    import urllib.error

    timeouts = (socket.timeout, TimeoutError)
    if isinstance(exc, urllib.error.URLError):
        return isinstance(exc.reason, timeouts)
    return isinstance(exc, timeouts)


def op_http(wd: Workdir, req: JsonObject) -> JsonObject:
    t0 = time.monotonic()
    timeout = check_seconds(req, "timeout_s")
    try:
        status, body = _request(
            req.get("method", "GET"),
            req["url"],
            req.get("body"),
            req.get("headers") or {},
            timeout,
            _max_bytes(req.get("max_bytes")),
        )
    except Exception as exc:  # noqa: BLE001 - refused, reset, bad status line: no answer
        return {
            "status": None,
            "body": "",
            "error": str(exc),
            "elapsed_s": time.monotonic() - t0,
            "timed_out": timed_out(exc),
        }
    reply = {"status": status, "body": body or "", "error": None}
    if body is None:
        reply["oversized"] = True
    return {**reply, "elapsed_s": time.monotonic() - t0}


def _max_bytes(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgentError("bad_request", f"max_bytes must be a byte count, not {value!r}")
    return value


HTTP_MANY_PARALLEL = 16


def op_http_many(wd: Workdir, req: JsonObject) -> JsonObject:
    """Several requests in one agent call, made concurrently (at most 16 at a time) so the
    call takes about as long as the slowest request; replies in the order asked."""
    import threading
    import urllib.request  # noqa: F401 - import once here, not racing in the threads

    items = req.get("requests")
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("url") for i in items):
        raise AgentError("bad_request", "http_many needs a list of requests, each with a url")
    timeout = check_seconds(req, "timeout_s")
    replies: list[JsonObject | None] = [None] * len(items)
    gate = threading.Semaphore(HTTP_MANY_PARALLEL)

    def one(i: int, item: JsonObject) -> None:
        with gate:
            try:
                replies[i] = op_http(wd, {"timeout_s": timeout, **item})
            except Exception as exc:  # noqa: BLE001 - one bad item must not lose the others
                replies[i] = {"status": None, "body": "", "error": str(exc), "elapsed_s": 0.0}

    threads = [
        threading.Thread(target=one, args=(i, it), daemon=True) for i, it in enumerate(items)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"replies": replies}


def op_wait_http(wd: Workdir, req: JsonObject) -> JsonObject:
    url = req["url"]
    timeout = check_seconds(req, "timeout_s")
    expect = req.get("expect", 200)
    expect_set = None if expect is None else set(expect if isinstance(expect, list) else [expect])
    name = req.get("name")
    # Import before the clock starts: the lazy import costs tens of ms (more on a loaded box)
    # and would make the first poll start late and its recorded start time wrong.
    import urllib.request  # noqa: F401

    t0 = time.monotonic()
    last = "no answer yet"
    attempts = 0
    last_miss_at = None  # start of the last attempt that did not succeed
    caller = os.getppid()
    while True:
        if os.getppid() != caller:
            # Our caller (the SSH session or the CLI) is gone: nobody will read the answer, so
            # stop polling instead of lingering on the target until the timeout.
            os._exit(3)
        attempts += 1
        started = time.monotonic()
        elapsed = started - t0
        try:
            status, body = _request("GET", url, None, {}, max(0.05, min(1.0, timeout - elapsed)))
            if expect_set is None or status in expect_set:
                now = time.monotonic()
                # The poll timing as measured here, so a caller can check the polling itself
                # (gap between the last miss and the hit) apart from transport and server time.
                return {
                    "elapsed_s": round(now - t0, 4),
                    "status": status,
                    "attempts": attempts,
                    "detected_at_monotonic": now,
                    "first_poll_at_monotonic": t0,
                    "last_miss_at_monotonic": last_miss_at,
                    "hit_started_at_monotonic": started,
                }
            last = f"HTTP {status}: {(body or '')[:200]}"
        except Exception as exc:  # noqa: BLE001 - refused, reset, bad status line: no answer
            last = str(getattr(exc, "reason", exc))
        last_miss_at = started
        if name:
            st = state_of(wd, check_name(name), [])
            if not st["alive"]:
                await_exit_record(wd, name, st["pid"])
                st = state_of(wd, name, [])
                raise AgentError(
                    "died",
                    f"{name} exited (code {st['exit_code']}) before {url} was ready",
                    elapsed_s=round(time.monotonic() - t0, 4),
                    exit_code=st["exit_code"],
                    log_tail=tail(wd.log(name), 40),
                    last=last,
                )
        if time.monotonic() - t0 >= timeout:
            raise AgentError(
                "timeout",
                f"{url} not ready after {timeout:g}s (last: {last})",
                elapsed_s=round(time.monotonic() - t0, 4),
                last=last,
                log_tail=tail(wd.log(name), 40) if name else "",
            )
        time.sleep(POLL_S)
