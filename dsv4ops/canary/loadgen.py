"""The streaming load generator: minimal work per event, JSON parsed after the stream ends.

Hot path per received chunk: one `perf_counter_ns()`, SSE framing, two list appends, and until the
first output a cheap byte test; `records.parse` does the rest once the stream has ended. For
`http://` targets the streams go through `rawhttp` (an asyncio Protocol that handles each read in
the event loop's callback, no task wake-up per event); anything else (https, credentials in the
URL) and the small control requests use one shared aiohttp `ClientSession`. Both were measured
side by side with httpx in benchmarks/loadgen_capacity.py (reference load-generators.md §4:
aiohttp ~6–26 µs per event, httpx 15–67 µs and saturating at ~15–23k events/s).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

import aiohttp

from dsv4ops.canary import rawhttp
from dsv4ops.canary import records as R
from dsv4ops.canary.limits import ServerLimits, server_message
from dsv4ops.canary.records import RequestRecord, parse
from dsv4ops.canary.sse import SseSplitter, is_token_event
from dsv4ops.canary.watchdog import Watchdog
from dsv4ops.clock import perf_ns, perf_s
from dsv4ops.jsontypes import JSONObject

CHAT_PATH = "/v1/chat/completions"
TIMED_OUT = "timed out"  # get_text_reply's why for a TimeoutError (and only for one)
# get_text_reply's why for a refused connection (and only for one): nothing listens on the port,
# the worker's process is gone; the sampler's dead-worker judge reads it
REFUSED = "connection refused: nothing listens on the port"
OVERSIZED = "oversized"  # get_text_reply's why for a body longer than its max_bytes
_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}

BodyFactory = Callable[[int], tuple[str, Mapping[str, object]]]  # index → (rid, request body)


class ChatClient:
    """`async with ChatClient(url, ...) as client: rec = await client.stream(body, rid=...)`."""

    def __init__(
        self,
        base_url: str,
        *,
        connections: int = 128,
        total_timeout_s: float = 120.0,
        watchdog: Watchdog | None = None,
        headers: Mapping[str, str] | None = None,
        path: str = CHAT_PATH,
        engine: str = "auto",
    ) -> None:
        """`engine`: "raw" (rawhttp; http:// only), "aiohttp", or "auto" (raw where it applies).
        `headers`: what every request to `base_url` carries besides the canary's own (the
        router's key: dsv4ops/apikey.py's auth_headers)."""
        if engine not in ("auto", "raw", "aiohttp"):
            raise ValueError(f"engine must be auto, raw or aiohttp, not {engine!r}")
        if engine == "raw" and not rawhttp.StreamingHttp.supports(base_url):
            raise ValueError(f"the raw engine speaks plain http:// only, not {base_url!r}")
        self.engine = (
            "raw" if engine != "aiohttp" and rawhttp.StreamingHttp.supports(base_url) else "aiohttp"
        )
        self.url = base_url.rstrip("/") + path
        self.path = urlsplit(self.url).path or "/"
        self.base_url = base_url.rstrip("/")
        self._connections = max(connections, 8)
        self._timeout = total_timeout_s
        self.watchdog = watchdog
        self._auth = dict(headers or {})
        self._headers = {**_HEADERS, **self._auth}
        self.session: aiohttp.ClientSession | None = None
        self._raw: rawhttp.StreamingHttp | None = None
        # what the server will serve (canary/limits.py): set once read, every stream sized by it
        self.limits = ServerLimits()

    async def __aenter__(self) -> ChatClient:
        connector = aiohttp.TCPConnector(
            limit=self._connections, limit_per_host=0, ttl_dns_cache=300
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self._timeout, sock_connect=10),
            read_bufsize=1 << 20,
        )
        if self.engine == "raw":
            self._raw = rawhttp.StreamingHttp(self.base_url, limit=self._connections)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._raw is not None:
            self._raw.close()
        if self.session is not None:
            await self.session.close()

    async def stream(
        self,
        body: Mapping[str, object],
        *,
        rid: str,
        tag: str = "",
        t_queued: int = 0,
        sink: list[RequestRecord] | None = None,
    ) -> RequestRecord:
        """Send one streaming request and record it. Never raises for server-side failures.

        The request runs in its own task so the watchdog can cut just this stream (a hang) without
        cancelling the caller; a cut request comes back with error `hang_<kind>`.
        """
        assert self.session is not None, "use ChatClient as an async context manager"
        rec = RequestRecord(rid=rid, tag=tag, t_queued=t_queued)
        body, asked = self.limits.fit(body)
        if asked is not None:
            rec.extra["max_tokens_asked"] = asked
        if sink is not None:
            sink.append(rec)  # kept even when the caller cancels this coroutine
        inner = asyncio.create_task(self._stream(rec, body))
        try:
            return await inner
        except asyncio.CancelledError:
            if rec.error is None and not rec.t_send:
                # cancelled before its task ran: never sent, and not a completed request either
                rec.error, rec.error_detail = R.ERR_CANCELLED, "cancelled before it was sent"
                rec.t_end = rec.t_end or perf_ns()
            me = asyncio.current_task()
            if inner.cancelled() and (me is None or not me.cancelling()):
                return rec  # cut by the watchdog, not by our caller
            raise

    async def _stream(self, rec: RequestRecord, body: Mapping[str, object]) -> RequestRecord:
        assert self.session is not None
        data = json.dumps(body).encode()
        wd = self.watchdog
        if wd is not None:
            wd.register(rec, asyncio.current_task())
        clock = perf_ns
        try:
            if self._raw is not None:
                await self._receive_raw(rec, data)
            else:
                await self._receive_aiohttp(rec, data)
            rec.t_end = clock()
        except asyncio.CancelledError:
            rec.t_end = clock()
            if rec.error is None:
                hang = rec.extra.get("hang")
                rec.error = R.hang_error(hang) if hang else R.ERR_CANCELLED
            _finish(rec, wd)
            raise
        except (
            TimeoutError,
            OSError,
            aiohttp.ClientError,
            rawhttp.Disconnected,
            rawhttp.HttpError,
        ) as exc:
            rec.error, rec.error_detail = _failure(exc, self._timeout)
        if not rec.t_end:
            rec.t_end = clock()
        _finish(rec, wd)
        return rec

    async def _receive_raw(self, rec: RequestRecord, data: bytes) -> None:
        """The stream over rawhttp: events land in `rec` from the loop's read callback."""
        assert self._raw is not None
        request = self._raw.request_bytes(self.path, data, self._headers)
        rec.t_send = perf_ns()
        async with asyncio.timeout(self._timeout):
            resp = await self._raw.post_stream(request, rec)
        rec.status = resp.status
        if resp.status != 200:
            text = resp.error_body.decode("utf-8", errors="replace")
            rec.error, rec.error_detail = R.ERR_HTTP, _http_detail(resp.status, text)

    async def _receive_aiohttp(self, rec: RequestRecord, data: bytes) -> None:
        """The stream over aiohttp (https, credentials in the URL): one task wake-up per read."""
        assert self.session is not None
        clock = perf_ns
        rec.t_send = clock()
        async with self.session.post(self.url, data=data, headers=self._headers) as resp:
            rec.status = resp.status
            if resp.status != 200:
                text = await resp.text(errors="replace")
                rec.error, rec.error_detail = R.ERR_HTTP, _http_detail(resp.status, text)
                return
            splitter = SseSplitter()
            times, payloads = rec.times, rec.payloads
            async for chunk in resp.content.iter_any():
                t = clock()
                rec.t_last = t
                events = splitter.feed(chunk)
                for ev in events:
                    times.append(t)
                    payloads.append(ev)
                if not rec.t_first and events and any(map(is_token_event, events)):
                    rec.t_first = t

    async def whole(self, body: Mapping[str, object]) -> tuple[JSONObject | None, str]:
        """The same request not streamed: (the response, "") or (None, what failed)."""
        assert self.session is not None
        fitted, _ = self.limits.fit({**body, "stream": False})
        sent = {k: v for k, v in fitted.items() if k != "stream_options"}
        try:
            async with self.session.post(self.url, json=sent, headers=self._auth) as resp:
                text = await resp.text(errors="replace")
                if resp.status != 200:
                    return None, _http_detail(resp.status, text)
                reply = json.loads(text)
                return (reply, "") if isinstance(reply, dict) else (None, "not a JSON object")
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:200]

    async def post_json(
        self, url: str, payload: Mapping[str, object], *, timeout_s: float = 5.0
    ) -> int:
        """POST a small JSON body (e.g. /abort_request); returns the HTTP status (0 if unreachable)."""
        assert self.session is not None
        try:
            async with self.session.post(
                url, json=payload, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, TimeoutError):
            return 0

    async def get_text(self, url: str, *, timeout_s: float = 2.0) -> tuple[int, str]:
        status, text, _ = await self.get_text_reply(url, timeout_s=timeout_s)
        return status, text

    async def get_text_reply(
        self, url: str, *, timeout_s: float = 2.0, max_bytes: int | None = None
    ) -> tuple[int, str, str | None]:
        """(status, text, why there is none): TIMED_OUT, decided by the exception's type (it
        accepted and did not answer in time), is told from a refused or broken connection,
        which watch judges differently; OVERSIZED (with the status) when the body is longer
        than `max_bytes`: the read stops there and the connection is closed."""
        assert self.session is not None
        # The router's key goes to the router only, never to a worker's /metrics or /server_info.
        auth = self._auth if url.startswith(self.base_url + "/") else None
        try:
            async with self.session.get(
                url, headers=auth, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as resp:
                if max_bytes is None:
                    return resp.status, await resp.text(errors="replace"), None
                body = await _read_at_most(resp, max_bytes)
                if body is None:
                    return resp.status, "", OVERSIZED
                return resp.status, body.decode(resp.charset or "utf-8", "replace"), None
        except TimeoutError:
            return 0, "", TIMED_OUT
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError)
            return 0, "", REFUSED if refused else f"{type(exc).__name__}: {exc}"[:200]
        except aiohttp.ClientError as exc:
            return 0, "", f"{type(exc).__name__}: {exc}"[:200]


async def _read_at_most(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes | None:
    """The body, or None (and the connection closed) as soon as it passes `max_bytes`: a
    runaway body is never held whole."""
    body = bytearray()
    async for chunk in resp.content.iter_chunked(1 << 16):
        body += chunk
        if len(body) > max_bytes:
            resp.close()
            return None
    return bytes(body)


def _http_detail(status: int, text: str) -> str:
    """An HTTP error as the server said it: its own message, unwrapped (canary/limits.py)."""
    return f"HTTP {status}: {server_message(text)[:300]}"


def _failure(exc: BaseException, timeout_s: float) -> tuple[str, str]:
    """(error kind, detail) of a request that failed on the client side; the same kinds for both
    engines. Order matters: aiohttp's connector error is an OSError and a ClientError."""
    if isinstance(exc, TimeoutError):
        return R.ERR_TIMEOUT, f"no complete response in {timeout_s} s"
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return R.ERR_CONNECT, str(exc)[:200]
    if isinstance(exc, rawhttp.Disconnected):
        return R.ERR_DISCONNECT, str(exc)[:200]
    if isinstance(exc, rawhttp.HttpError | aiohttp.ClientError):
        return R.ERR_DISCONNECT, f"{type(exc).__name__}: {exc}"[:200]
    return R.ERR_CONNECT, f"{type(exc).__name__}: {exc}"[:200]  # OSError: no connection


def _finish(rec: RequestRecord, wd: Watchdog | None) -> None:
    if rec.times and rec.error is None:
        parse(rec)
    elif rec.times:  # keep the output seen so far for diagnosis, but do not overwrite the error
        err, detail = rec.error, rec.error_detail
        rec.error = None
        parse(rec)
        rec.error, rec.error_detail = err, detail
    elif rec.error is None:
        rec.error, rec.error_detail = R.ERR_TRUNCATED, "empty response body"
    if wd is not None:
        wd.unregister(rec)


async def closed_loop(
    client: ChatClient,
    make_body: BodyFactory,
    *,
    concurrency: int,
    num_requests: int | None = None,
    duration_s: float | None = None,
    tag: str = "",
    stop: asyncio.Event | None = None,
    sink: list[RequestRecord] | None = None,
    counter: itertools.count[int] | None = None,
) -> list[RequestRecord]:
    """`concurrency` workers, each sending its next request when the previous one ends.

    Stops issuing after `num_requests` or `duration_s` (or when `stop` is set), then drains.
    """
    if num_requests is None and duration_s is None:
        raise ValueError("closed_loop needs num_requests or duration_s")
    out: list[RequestRecord] = [] if sink is None else sink
    ids = counter if counter is not None else itertools.count()
    deadline = perf_s() + duration_s if duration_s is not None else None

    async def worker() -> None:
        while True:
            if stop is not None and stop.is_set():
                return
            if deadline is not None and perf_s() >= deadline:
                return
            i = next(ids)
            if num_requests is not None and i >= num_requests:
                return
            rid, body = make_body(i)
            await client.stream(body, rid=rid, tag=tag, t_queued=perf_ns(), sink=out)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def poisson(
    client: ChatClient,
    make_body: BodyFactory,
    *,
    rate_per_s: float,
    num_requests: int,
    max_concurrency: int | None = None,
    tag: str = "",
    seed: int = 0,
) -> list[RequestRecord]:
    """Open loop: exponential inter-arrival gaps at `rate_per_s`, optionally capped.

    The slot wait under the cap is stamped (t_queued) so queueing is reported next to TTFT
    instead of hidden in it (the coordinated-omission problem of vllm#54101).
    """
    rng = random.Random(seed)
    out: list[RequestRecord] = []
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    tasks: list[asyncio.Task[RequestRecord]] = []

    async def one(i: int, arrived: int) -> RequestRecord:
        rid, body = make_body(i)
        if sem is None:
            return await client.stream(body, rid=rid, tag=tag, t_queued=arrived, sink=out)
        async with sem:
            return await client.stream(body, rid=rid, tag=tag, t_queued=arrived, sink=out)

    for i in range(num_requests):
        tasks.append(asyncio.create_task(one(i, perf_ns())))
        await asyncio.sleep(rng.expovariate(rate_per_s))
    await asyncio.gather(*tasks)
    return out


def level_windows(
    starts: Sequence[float], end: float, warm_frac: float = 0.3
) -> list[tuple[float, float]]:
    """Steady-state windows of a staircase: each level minus its warm-up share."""
    edges = list(starts) + [end]
    return [(a + (b - a) * warm_frac, b) for a, b in zip(edges, edges[1:], strict=False)]
