"""The one status word of a report and a component's process word (issue 20: each decided
in one place, on positive evidence), and the journal's record of a stop that left the unit
STOPPED (issue 38: status after `stop` said NOT HEALTHY with the dead processes' pids)."""

from __future__ import annotations

from collections.abc import Mapping

from dsv4ops.deployment import Deployment
from dsv4ops.journal.records import Kind
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.status_report import ComponentRow, StoppedBy
from dsv4ops.orchestrate.unmanaged import UNMANAGED

HEALTHY, NOT_HEALTHY, UNKNOWN_HEALTH = "HEALTHY", "NOT HEALTHY", "UNKNOWN"
STOPPED = "STOPPED"


def health_word(report: Mapping[str, object]) -> str:
    """The one status word of a report, on positive evidence only: HEALTHY when every check
    answered and passed; UNKNOWN when nothing of the unit could be observed (target unreachable,
    an endpoint's router silent) or the journal it reads lacks records this machine kept (a
    record that lost history, until `journal --merge`); UNMANAGED when nothing is recorded but its ports answer
    (unmanaged.py); STOPPED when the journal's last word is a stop that left nothing running
    and no process of the unit is alive; else NOT HEALTHY (down, drift, an unfinished
    operation). exitcodes.for_health."""
    if report.get("reachable") is False or _history_missing(report):
        return UNKNOWN_HEALTH
    if report.get("unmanaged"):
        return UNMANAGED
    components = report.get("components")
    alive = isinstance(components, list) and any(
        isinstance(c, Mapping) and c.get("alive") for c in components
    )
    if report.get("stopped") and not alive and not report.get("attention"):
        return STOPPED
    router = report.get("router")
    if (
        isinstance(router, Mapping)
        and router.get("readiness") is None
        and not isinstance(router.get("health"), int)
    ):
        return UNKNOWN_HEALTH  # an endpoint target whose router answered nothing
    return HEALTHY if report.get("healthy") else NOT_HEALTHY


def _history_missing(report: Mapping[str, object]) -> bool:
    """The target's record lacks records this machine kept (`journal --merge`): what it says is
    deployed may be an older word, so nothing is called healthy or stopped on it."""
    record = report.get("record")
    return isinstance(record, Mapping) and bool(record.get("diverged"))


def process_word(component: ComponentRow) -> str:
    """A component's process column, beside health_word: up (our process, alive), UNMANAGED (not
    ours, but one of its ports accepts), DOWN (neither)."""
    if component["alive"]:
        return "up"
    return UNMANAGED if any((component.get("ports_open") or {}).values()) else "DOWN"


def stopped_by(journal: Journal, last: Deployment | None) -> StoppedBy | None:
    """The stop that is the journal's last word on what runs, when it left nothing running:
    {"op", "since", "by", "last_profile"}; else None (never stopped, or something ran after)."""
    for op in reversed(journal.operations()):
        if not (op.status.terminal and op.running is not None):
            continue
        if op.kind is not Kind.STOP or op.running != "":
            return None
        return {
            "op": op.op,
            "since": op.ended,
            "by": op.user,
            "last_profile": last.profile_name if last is not None else None,
        }
    return None
