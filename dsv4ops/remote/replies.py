"""The agent's replies as the Supervisor's typed results (supervisor.py makes the calls): a
readiness wait that ended as a WaitResult or a ComponentNotReadyError, a component's state, a
start's record, a stop's report, an HTTP reply, a preflight report, and the requests of an
`http_many` call checked before they leave. Each reads its reply by key and type, as the agent
writes it; the Supervisor runs each under `wire.typed`, so a reply of another shape is that
call's transport failure (remote/wire.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dsv4ops.jsontypes import JSONValue
from dsv4ops.remote.base import ProcessState
from dsv4ops.remote.errors import AgentCallError, ComponentNotReadyError, StopError
from dsv4ops.remote.results import (
    HttpReply,
    HttpRequest,
    PortUse,
    PreflightReport,
    StopReport,
    WaitResult,
)

_HTTP_FIELDS = frozenset({"url", "method", "body", "headers", "timeout_s", "max_bytes"})


def not_ready_error(
    exc: AgentCallError, *, url: str, name: str | None, host: str, waited_before_s: float = 0.0
) -> ComponentNotReadyError:
    """A wait that timed out or whose process died, with the process's last log lines
    (`waited_before_s`: what the wait took before the attempt that answered, an outage)."""
    tail = str(exc.reply.get("log_tail") or "")
    code = exc.reply.get("exit_code")
    who = f"{name} " if name else ""
    msg = f"{who}not ready on {host}: {exc.reply.get('error')}"
    if tail:
        msg += "\n--- last log lines ---\n" + tail
    return ComponentNotReadyError(
        msg,
        url=url,
        reason=exc.kind,
        elapsed_s=(_opt_float(exc.reply.get("elapsed_s")) or 0.0) + waited_before_s,
        name=name,
        log_tail=tail,
        component_exit_code=code if isinstance(code, int) else None,
        last=str(exc.reply.get("last") or ""),
    )


def wait_result(r: Mapping[str, JSONValue], waited_before_s: float = 0.0) -> WaitResult:
    """A wait's reply; `waited_before_s` (an outage ridden out before the attempt that answered)
    counts in its elapsed time."""
    return WaitResult(
        float(r["elapsed_s"]) + waited_before_s,
        int(r["status"]),
        int(r["attempts"]),
        float(r["detected_at_monotonic"]),
        _opt_float(r.get("last_miss_at_monotonic")),
        _opt_float(r.get("hit_started_at_monotonic")),
        _opt_float(r.get("first_poll_at_monotonic")),
    )


def http_items(requests: Sequence[str | HttpRequest]) -> list[HttpRequest]:
    """Each request as the agent's mapping; ValueError for one without a url or with unknown keys."""
    items: list[HttpRequest] = []
    for req in requests:
        item: HttpRequest = {"url": req} if isinstance(req, str) else req.copy()
        unknown = set(item) - _HTTP_FIELDS
        if not item.get("url") or unknown:
            raise ValueError(
                f"http_many: each request needs a url and only {sorted(_HTTP_FIELDS)}"
                f" (got {sorted(item)})"
            )
        if "headers" in item:
            item["headers"] = dict(item["headers"] or {})
        items.append(item)
    return items


def _opt_float(value: object) -> float | None:
    """A number the agent may leave out (None); one that is no number counts as left out."""
    try:
        return float(value) if isinstance(value, int | float | str) else None
    except ValueError:
        return None


def started_state(name: str, rec: Mapping[str, JSONValue]) -> ProcessState:
    """A `start` reply: the component's run record."""
    return ProcessState(
        name=name,
        pid=rec["pid"],
        alive=True,
        started_at=rec["started_at"],
        argv=tuple(rec["argv"]),
        env=rec["env"],
        log_path=rec["log_path"],
    )


def stop_report(name: str, host: str, r: Mapping[str, JSONValue]) -> StopReport | StopError:
    """A `stop` reply: its report, or the error to raise when a process or a port outlived it."""
    if r["left"] or r["ports_open"]:
        bits = []
        if r["left"]:
            bits.append(f"processes {r['left']} of group {r['pgid']} survived SIGKILL")
        for port in r["ports_open"]:
            holders = r["port_holders"].get(str(port)) or "unknown pid"
            bits.append(f"port {port} still open (held by {holders})")
        return StopError(
            f"stop {name} on {host}: " + "; ".join(bits),
            name=name,
            left=list(r["left"]),
            ports_open=list(r["ports_open"]),
        )
    return StopReport(name, r["pid"], r["was_running"], tuple(r["signals"]), r["elapsed_s"])


def process_state(name: str, s: Mapping[str, JSONValue]) -> ProcessState:
    """One component of a `status` reply."""
    argv = s["argv"]
    return ProcessState(
        name=name,
        pid=s["pid"],
        alive=s["alive"],
        started_at=s["started_at"],
        argv=tuple(argv) if isinstance(argv, list) else None,
        env=s["env"],
        ports_open={int(p): v for p, v in s["ports_open"].items()},
        log_path=s["log_path"],
        exit_code=s["exit_code"],
    )


def http_reply(r: Mapping[str, JSONValue]) -> HttpReply:
    """An agent's http reply; `timed_out` False when the agent did not say (an older one)."""
    status, error, elapsed = r["status"], r["error"], r["elapsed_s"]
    return HttpReply(
        int(status) if isinstance(status, int | float) else None,
        str(r["body"]),
        None if error is None else str(error),
        float(elapsed) if isinstance(elapsed, int | float) else 0.0,
        timed_out=bool(r.get("timed_out")),
        oversized=bool(r.get("oversized")),
    )


def preflight_report(r: Mapping[str, JSONValue]) -> PreflightReport:
    """A `preflight` reply."""
    g = r["gpus"]
    return PreflightReport(
        host=r["host"],
        workdir=r["workdir"],
        writable=r["writable"],
        writable_error=r["writable_error"],
        ports={
            int(p): PortUse(u["in_use"], tuple((h["pid"], h["ours"]) for h in u["holders"]))
            for p, u in r["ports"].items()
        },
        gpus_available=g["available"],
        gpu_note=g["note"],
        gpus_busy={int(i): tuple(p) for i, p in g.get("busy", {}).items()},
        gpus_missing=tuple(g.get("missing", ())),
        paths=r["paths"],
    )
