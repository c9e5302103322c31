"""Taking and releasing a target's deploy lock for one operation, and resolving what an earlier,
interrupted operation left: never silently.

A lock whose holder is alive refuses at once, naming it. A lock left by a dead holder (the agent
judges by pid, process start time and boot: procident.py) is cleared with a note when the journal
shows its operation ended (only the release was lost), broken with `--recover`, else refused.
An operation the journal shows never ended blocks the next command until `--recover` marks it
ABANDONED: what it left running is unknown, and carrying on would build on a guess.
"""

from __future__ import annotations

from collections.abc import Callable

from dsv4ops.errors import AgentCallError, DiskFullError, DsOpsError, LockHeldError, TargetError
from dsv4ops.journal.commands import command as printed  # `command`: the lock holder's
from dsv4ops.journal.commands import recover_commands
from dsv4ops.journal.records import Operation, Status
from dsv4ops.journal.store import UNKNOWN, Journal
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.remote.errors import DeployLockError
from dsv4ops.remote.results import lock_holder
from dsv4ops.whoami import local_host


def resolve_hint(journal: Journal) -> str:
    """What resolves what an interrupted operation left, on this journal's target."""
    return f"see {printed('status', journal.target)}; resolve with {recover_commands(journal)}"


def take_lock(
    control: TargetControl,
    journal: Journal,
    op_id: str,
    command: str,
    recover: bool,
    progress: Callable[[str], None],
) -> list[str]:
    """Acquire the deploy lock for `op_id`; return the notes about what it resolved."""
    notes: list[str] = []
    holder = lock_holder(command, op_id)
    try:
        control.lock_acquire(holder)
    except AgentCallError as exc:
        if exc.kind != "disk_full":
            raise
        raise DiskFullError(
            f"{command}: cannot take the deploy lock on the target: {exc.reply.get('error')}. "
            "Nothing was changed: whatever ran before runs still.",
            hint=f"free space on the target's disk (`df -h {control.workdir}` there), then run "
            f"the command again; {printed('status', journal.target)} shows what runs",
        ) from None
    except DeployLockError as exc:
        held = exc.holder
        stale = exc.stale
        held_op = _find(journal, held.get("op_id"))
        ours = held.get("host") == local_host() and held.get("pid") == holder["pid"]
        if held_op is not None and held_op.status.terminal and (stale or ours):
            # The journal says that operation ended; only its lock release was lost
            # (e.g. the SSH connection dropped). Safe to clear.
            notes.append(
                f"cleared the deploy lock left by {held_op.op}, which ended {held_op.status.value}"
            )
        elif stale and recover:
            notes.append(f"broke the deploy lock left by dead process pid {held.get('pid')}")
        elif stale:
            raise LockHeldError(
                f"{exc}. {interrupted_line(held_op)}", hint=resolve_hint(journal)
            ) from None
        else:
            raise
        control.lock_acquire(holder, force=True)
    flying = journal.in_flight()
    if flying and not recover:
        # Its CLI died after the lock was released or broken: refuse, and say how to resolve it.
        release_lock(control, op_id, progress)
        raise LockHeldError(
            f"{interrupted_line(flying[-1])} and never ended; what it left running is unknown. "
            "Nothing was changed.",
            hint=resolve_hint(journal),
        )
    for op in flying:
        msg = f"interrupted {op.position}; resolved by {op_id}"
        journal.transition(op.op, Status.ABANDONED, message=msg, running=UNKNOWN)
        notes.append(f"{op.kind.value} {op.op} of {op.profile_name or '-'} was {msg}")
    for n in notes:
        progress(f"note: {n}")
    return notes


def release_lock(control: TargetControl, op_id: str, progress: Callable[[str], None]) -> None:
    try:
        control.lock_release(op_id)
    except (TargetError, DsOpsError) as exc:
        # Left for the next command, which sees the journal says this op ended.
        progress(f"warning: could not release the deploy lock ({exc})")


def interrupted_line(op: Operation | None) -> str:
    if op is None:
        return "The journal has no record of its operation"
    return (
        f"The journal shows {op.kind.value} {op.op} of {op.profile_name or '-'} was interrupted "
        f"{op.position}"
    )


def _find(journal: Journal, op_id: object) -> Operation | None:
    if not isinstance(op_id, str):
        return None
    return journal.operations().find(op_id)  # through the index: only that operation is read
