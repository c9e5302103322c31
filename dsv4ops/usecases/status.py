"""`dsv4ops status`: the report of what runs on a target, composed once, for the verb and for
the runbook engine's preconditions (`runbooks.world.TargetWorld`'s `status`), so a runbook's
`requires: healthy` reads exactly what `dsv4ops status` prints."""

from __future__ import annotations

from collections.abc import Callable

from dsv4ops import exitcodes
from dsv4ops.journal.commands import command as command  # a printed command names its target
from dsv4ops.journal.store import FileBackend, Journal
from dsv4ops.orchestrate.health import health_word as health_word  # the report's one word
from dsv4ops.orchestrate.health import process_word as process_word  # a component's process
from dsv4ops.orchestrate.status import KernelStatus, gather_status, journal_status
from dsv4ops.orchestrate.status_report import ComponentRow as ComponentRow  # the report's parts
from dsv4ops.orchestrate.status_report import DeployedRow as DeployedRow
from dsv4ops.orchestrate.status_report import EndpointReport as EndpointReport
from dsv4ops.orchestrate.status_report import KernelRow as KernelRow
from dsv4ops.orchestrate.status_report import OpenOperation
from dsv4ops.orchestrate.status_report import StatusReport as StatusReport
from dsv4ops.orchestrate.status_report import StoppedBy as StoppedBy
from dsv4ops.usecases.compose import kernel_support
from dsv4ops.usecases.journal import SeenLock, entry, lock_of_report
from dsv4ops.usecases.render import render_now
from dsv4ops.usecases.session import TargetSession


def status_reader(session: TargetSession, journal: Journal) -> Callable[[], StatusReport]:
    """Reads the live report of the session's target (orchestrate.status.gather_status) with
    `journal`, its drift against the working copy's render and its kernels; each call reads
    anew. Raises only for an unreachable target."""
    kernels = KernelStatus(
        state=lambda: session.supervisor.read_state("kernels"),
        loaded=kernel_support(session).loaded,
    )

    def read() -> StatusReport:
        return gather_status(
            session.supervisor,
            journal,
            target=session.target.name,
            render_now=render_now(session.target),
            kernels=kernels,
        )

    return read


def target_status(session: TargetSession) -> tuple[StatusReport, Journal]:
    """The report of `dsv4ops status` (without its word: `with_word`) and the journal snapshot
    it was answered from. The target's record is synced once (the cache when the target is
    unreachable: then only what the journal says, nothing observed); every question is answered
    from that one copy: one view, one round trip."""
    session.journal.sync()
    record = session.journal.source()
    snapshot = Journal(session.target.name, backend=FileBackend(session.journal.path))
    if record["source"] == "cache":
        report = journal_status(snapshot, target=session.target.name, record=record)
    else:
        report = status_reader(session, snapshot)()
        report["record"] = record
    # Lines of the journal that are no record of their operation (journal/damage.py): the
    # report is what the rest says; the lines are also printed as warnings when read.
    report["journal_warnings"] = snapshot.warnings()
    return report, snapshot


def is_endpoint(target_name: str | None) -> bool:
    """Whether the target is an endpoint (a cluster): its status is the router's, read-only."""
    from dsv4ops.profiles import get_target

    return get_target(target_name).endpoint is not None


def status_report(session: TargetSession) -> StatusReport:
    """`target_status`'s report with its open operations (`open`), each as the journal listing
    judges it, the deploy lock as the report read it."""
    report, snapshot = target_status(session)
    report["open"] = open_operations(snapshot, lock_of_report(report))
    return report


def open_operations(journal: Journal, lock: SeenLock) -> list[OpenOperation]:
    """Runs and experiments (and any operation) not ended, with their true state and the
    command that resumes or recovers them (the journal listing's `next`)."""
    ops = journal.operations()
    judged = journal.judged()
    out: list[OpenOperation] = []
    # The index knows which are not ended: only those operations are read (10^6-record journals).
    for o in (ops[i] for i in ops.positions(terminal=False)):
        s = entry(o, judged, journal, lock)
        if not o.status.terminal:
            out.append(
                {
                    "id": s["id"],
                    "kind": s["kind"],
                    "status": s["status"],
                    "profile": s["profile"],
                    "when": s["when"],
                    "next": s["next"],
                    "runbook": _runbook_name(o.reason),
                }
            )
    return out


def _runbook_name(reason: str | None) -> str | None:
    """A run's journaled reason is `runbook NAME` or `runbook NAME: WHY` (runbooks/runlog.py)."""
    return (reason or "").removeprefix("runbook ").split(": ", 1)[0] or None


def with_word(report: StatusReport | EndpointReport) -> None:
    """Give the report its one status word and its exit code (dsv4ops/exitcodes.py): a damaged
    recorded setting is FAILED (2) whatever the word."""
    word = health_word(report)
    report["status"] = word
    report["exit"] = exitcodes.for_status(word, damaged=bool(report.get("recorded_damage")))
