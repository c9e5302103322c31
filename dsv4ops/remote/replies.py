"""The agent's replies as the Supervisor's typed results (supervisor.py makes the calls): a
readiness wait that ended as a WaitResult or a ComponentNotReadyError, and the requests of an
`http_many` call checked before they leave.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dsv4ops.jsontypes import JSONObject, JSONValue
from dsv4ops.remote.errors import AgentCallError, ComponentNotReadyError
from dsv4ops.remote.results import WaitResult

_HTTP_FIELDS = frozenset({"url", "method", "body", "headers", "timeout_s"})


def not_ready_error(
    exc: AgentCallError, *, url: str, name: str | None, host: str
) -> ComponentNotReadyError:
    """A wait that timed out or whose process died, with the process's last log lines."""
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
        elapsed_s=_opt_float(exc.reply.get("elapsed_s")) or 0.0,
        name=name,
        log_tail=tail,
        component_exit_code=code if isinstance(code, int) else None,
        last=str(exc.reply.get("last") or ""),
    )


def wait_result(r: Mapping[str, JSONValue]) -> WaitResult:
    return WaitResult(
        float(r["elapsed_s"]),
        int(r["status"]),
        int(r["attempts"]),
        float(r["detected_at_monotonic"]),
        _opt_float(r.get("last_miss_at_monotonic")),
        _opt_float(r.get("hit_started_at_monotonic")),
        _opt_float(r.get("first_poll_at_monotonic")),
    )


def http_items(requests: Sequence[str | Mapping[str, JSONValue]]) -> list[JSONObject]:
    """Each request as the agent's mapping; ValueError for one without a url or with unknown keys."""
    items: list[JSONObject] = []
    for req in requests:
        item: JSONObject = {"url": req} if isinstance(req, str) else dict(req)
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
    return float(value) if isinstance(value, int | float | str) else None
