"""An operation whose journal cannot be written any more (a full disk, issue 40).

The journal records a step before it runs. When that record cannot be written, the operation
stops there: no step runs unrecorded, so no automatic rollback is tried either (it would be the
same unrecorded change). What did happen is kept (`Journal.keep_unwritten`): retried by every
later write of this command, then handed to the cache for the next command to merge; the outcome
is FAILED (exit 2) and names what runs now, read from the target, and the recover command.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from dsv4ops.deployment import START_ORDER, Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.commands import command, recover_commands
from dsv4ops.journal.records import Status
from dsv4ops.journal.schema import StatusRecord, to_json
from dsv4ops.journal.store import UNKNOWN, Journal
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.operation import RunningOperation
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.steplog import RunLog


class JournalLost(Exception):
    """The journal could not record step `step` (`why`); `ran`: whether the step ran (its end
    was not recorded) or not (its start was not); `failure`: the step's own failure, if any."""

    def __init__(self, step: str, why: str, *, ran: bool, failure: str | None = None) -> None:
        super().__init__(f"{step}: {why}")
        self.step, self.why, self.ran, self.failure = step, why, ran, failure


@contextlib.contextmanager
def journal_lost_as(step: str) -> Iterator[None]:
    """A journal write in the block that fails (after `step` was done) raises JournalLost."""
    try:
        yield
    except DsOpsError as exc:
        raise JournalLost(step, str(exc), ran=True) from exc


def unrecorded_outcome(
    op: RunningOperation,
    control: TargetControl,
    lost: JournalLost,
    log: RunLog,
    new: Deployment,
    notes: list[str],
    total_s: float,
) -> Outcome:
    """The Outcome (FAILED, exit 2) of a deploy or rollback of `new` stopped by `lost`."""
    what = f"{op.kind.value} of {new.describe()}"
    message, running = stop_unrecorded(op, control, lost, what)
    return Outcome(
        ok=False,
        op_id=op.op_id,
        kind=op.kind.value,
        status=Status.FAILED.value,
        profile=new.profile_name,
        message=message,
        running=running,
        total_s=total_s,
        steps=log.as_json(),
        ready_wait_s=dict(log.ready_wait_s),
        probe=log.probe_checks,
        notes=notes + unwritten_notes(op.journal),
    )


def unwritten_notes(journal: Journal) -> list[str]:
    """The records no place would take, one note each (the --json document keeps them)."""
    return [
        f"unwritten journal record: {json.dumps(to_json(r), sort_keys=True)}"
        for r in journal.unwritten()
    ]


def running_now(control: TargetControl) -> str:
    """What runs on the target, as the target says (the journal cannot be trusted to)."""
    try:
        states = control.status(list(START_ORDER))
    except DsOpsError as exc:
        return f"unknown (the target's process state could not be read: {exc})"
    up = [f"{n} (pid {s.pid})" for n, s in states.items() if s.alive]
    down = [n for n, s in states.items() if not s.alive]
    words = ", ".join(up) if up else "nothing"
    return words + (f"; not running: {', '.join(down)}" if down and up else "")


def stop_unrecorded(
    op: RunningOperation, control: TargetControl, lost: JournalLost, what: str
) -> tuple[str, str]:
    """(message, running now) of operation `op` (`what`: "deploy of P @ c") stopped by `lost`;
    journals its FAILED end when the journal takes it now, else keeps it for later."""
    running = running_now(control)
    step = f"after '{lost.step}' ran" if lost.ran else f"before '{lost.step}' (it did not run)"
    failed = f" The step had failed: {lost.failure}." if lost.failure else ""
    message = (
        f"{what} stopped {step}: the journal cannot be written ({lost.why}).{failed} Nothing "
        "more was changed and no automatic rollback was tried: no step runs unrecorded.\n"
        f"Running now: {running}."
    )
    journal = op.journal
    try:
        op.finish(Status.FAILED, message=message, running=UNKNOWN)
    except DsOpsError:  # it reads the journal first: record the end unread, kept below
        if not any(
            isinstance(r, StatusRecord) and r.status is Status.FAILED for r in journal.unwritten()
        ):
            with contextlib.suppress(DsOpsError):
                journal.end_unread(op.op_id, Status.FAILED, message=message, running=UNKNOWN)
        op.ended = True
    left = len(journal.unwritten())
    if left:
        where = journal.keep_elsewhere()
        message += (
            f"\n{left} journal record(s) of what happened were kept in {where}; the next "
            "command writes them to the journal of record."
            if where
            else f"\n{left} journal record(s) of what happened could not be written anywhere: "
            "they are listed in this command's --json output (notes)."
        )
    return f"{message}\nTo recover: free space on the disk, then run {recover(journal)}.", running


def recover(journal: Journal) -> str:
    """The commands that resolve it, on this journal's target (the journal that lost records
    may refuse to be read: then both commands, which judge it themselves when run)."""
    try:
        return recover_commands(journal)
    except DsOpsError:
        t = journal.target
        return f"{command('rollback', t, '--recover')} or {command('stop', t, '--recover')}"
