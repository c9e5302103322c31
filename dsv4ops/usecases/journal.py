"""`dsv4ops journal`: the listing of the session's journal (the target's record, or the local
cache when the target cannot be reached), each operation with its true state and what to run
next; `journal --merge`: the records this machine kept appended back into the record.
`status` lists its open operations with the same rule (`entry`)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias, TypedDict

from dsv4ops import exitcodes
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.backend import JournalSource as JournalSource  # cli/journal.py's
from dsv4ops.journal.backend import MergeDone
from dsv4ops.journal.commands import command, recover_commands
from dsv4ops.journal.gates import GateVerdict
from dsv4ops.journal.records import Judgement, Kind, Operation, OperationSummary
from dsv4ops.journal.schema import read_gate
from dsv4ops.journal.store import Journal
from dsv4ops.journal.target import TargetJournal
from dsv4ops.jsontypes import JSONObject
from dsv4ops.orchestrate.status_report import StatusReport
from dsv4ops.remote.results import LockInfo
from dsv4ops.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.runbooks.runlog import Resume


class Unseen(enum.Enum):
    """The deploy lock was not read (the target unreachable): liveness unknown."""

    UNSEEN = "unseen"


UNSEEN: Final = Unseen.UNSEEN
# The deploy lock as read: its holder, None when free, UNSEEN when it could not be read.
SeenLock: TypeAlias = LockInfo | None | Unseen


class JournalEntry(OperationSummary):
    """A listed operation: its summary with its true state (`status`) and the command to run
    next (None: nothing)."""

    next: str | None


class RunbookEntry(JournalEntry):
    """A listed runbook run: also who resumed it, and why."""

    resumes: list[Resume]


@dataclass(frozen=True)
class Listing:
    """What `dsv4ops journal` prints: the newest operations (each an `entry`), where the
    history comes from (`source`), the merges recorded, the torn lines skipped, the lines
    that are no record of their operation (`warnings`: journal/damage.py) and the exit code."""

    target: str
    path: str
    source: JournalSource
    skipped_lines: list[int]
    merges: list[JSONObject]
    entries: list[JournalEntry]
    warnings: list[str]

    @property
    def exit(self) -> int:
        """UNDECIDED while the record lacks records this machine kept (the history shown is
        not all of it: `journal --merge`); OK otherwise (exitcodes.py)."""
        return exitcodes.UNDECIDED if self.source.get("diverged") else exitcodes.OK


def journal_listing(session: TargetSession, limit: int) -> Listing:
    """The newest `limit` operations of the session's journal, judged over the whole journal,
    with the deploy lock read (when the target is reached) to tell a live operation from an
    abandoned one."""
    j = session.journal
    # Through the journal's index (journal/index.py): only the listed operations are read.
    ops, judged, merges = j.listing(limit)  # one read; judged over the whole journal
    source = j.source()
    lock = _lock(session, source)
    return Listing(
        j.target,
        str(j.path),
        source,
        j.skipped_lines,
        merges,
        [entry(o, judged, j, lock) for o in ops],
        j.warnings(),
    )


class StepView(TypedDict):
    """One step record of an operation, as `journal --id` shows it."""

    ts: str
    name: str
    phase: str  # start | done | failed
    duration_s: float | None
    detail: str | None
    gate: str | None  # the gate its end recorded, as listed (GateResult.label); whole: `gates`


@dataclass(frozen=True)
class OperationView:
    """`dsv4ops journal --id ID`: one operation as `journal` lists it (its entry: true state,
    known-good and why, gates, what to run next) and every step it recorded, in order."""

    target: str
    source: JournalSource
    entry: JournalEntry
    steps: list[StepView]

    @property
    def exit(self) -> int:
        """UNDECIDED while the record lacks records this machine kept, as the listing."""
        return exitcodes.UNDECIDED if self.source.get("diverged") else exitcodes.OK


def journal_operation(session: TargetSession, op_id: str) -> OperationView:
    """The operation with this id (or unique prefix) and its steps. Raises JournalError (no
    such operation, an ambiguous prefix)."""
    j = session.journal
    o = j.get(op_id)
    source = j.source()
    steps: list[StepView] = [
        {
            "ts": s.ts,
            "name": s.name,
            "phase": s.phase,
            "duration_s": s.duration_s,
            "detail": s.detail,
            "gate": s.gate.label if s.gate is not None else None,
        }
        for s in o.steps
    ]
    return OperationView(j.target, source, entry(o, j.judged(), j, _lock(session, source)), steps)


def _lock(session: TargetSession, source: JournalSource) -> SeenLock:
    """The target's deploy lock (None: free), or UNSEEN when it cannot be read."""
    if source.get("source") == "cache":
        return UNSEEN
    try:
        return session.supervisor.lock_info()
    except DsOpsError:
        return UNSEEN


def lock_of_report(report: StatusReport) -> SeenLock:
    """The deploy lock as `status`'s report read it (a LockInfo, None when free), or UNSEEN
    when the target was not reached."""
    if "lock" not in report:
        return UNSEEN
    lock = report["lock"]
    return LockInfo(lock["holder"], lock["stale"]) if lock else None


def entry(
    o: Operation, judged: Mapping[str, Judgement], journal: Journal, lock: SeenLock = UNSEEN
) -> JournalEntry:
    """One operation's summary with its true state and what to run next: a runbook run is
    RUNNING only while its process lives (runbooks/runlog.run_state); an operation that never
    ended is RUNNING only while the deploy lock names it (or the experiment it runs within)
    and its holder lives; its process gone, it is ABANDONED, with the recover command."""
    from dsv4ops.runbooks.runlog import resumes, run_state

    summary = o.summary(judged.get(o.op))
    if o.kind is Kind.RUNBOOK:
        state, then = run_state(o)
        run: RunbookEntry = {**summary, "status": state, "next": then, "resumes": resumes(o)}
        return run
    s: JournalEntry = {**summary, "next": None}
    if o.status.terminal:
        return s
    recover = (
        command("rollback", journal.target, "--recover")
        + " (puts the box back on A; `ab` has no --recover of its own)"
        if o.kind is Kind.EXPERIMENT
        else recover_commands(journal)
    )
    if lock is UNSEEN:
        s["next"] = f"if its process is gone: {recover}"
        return s
    holder = lock.holder.get("op_id") if lock is not None and not lock.stale else None
    inside = holder is not None and (o.reason or "").startswith(f"experiment {holder}:")
    if holder != o.op and not inside:
        s["status"] = "ABANDONED"
        s["next"] = f"its process is gone (no live deploy lock names it): {recover}"
    return s


def merge_kept_records(session: TargetSession) -> MergeDone | None:
    """`journal --merge`: append the records this machine kept when the target's record lost
    history back into the record (TargetJournal.merge_diverged); None when the session's
    journal is a local file (nothing to merge). A TargetError when the target is unreachable."""
    backend = session.journal.backend
    if not isinstance(backend, TargetJournal):
        return None
    return backend.merge_diverged()


def gate_labels(summary: Mapping[str, object]) -> list[str]:
    """Each gate of an operation's `journal --json` summary as `dsv4ops journal` prints it
    (GateResult.label: the verdict's word is its enum's)."""
    gates = summary.get("gates")
    where, items = str(summary.get("id")), gates if isinstance(gates, list) else []
    return [read_gate(g, where).label for g in items]


def accepted_inconclusive(judged: Mapping[str, object]) -> bool:
    """Whether a `--json` judgement (records.judged_json) is known-good by an INCONCLUSIVE
    accepted as asked (ranked below every pass): read off `known_good_gate`, the enum's value."""
    return judged.get("known_good_gate") == GateVerdict.INCONCLUSIVE.value
