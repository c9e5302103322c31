"""What `dsv4ops status` says needs attention: half-finished operations, a deployment that
ended without knowing what runs, and stale deploy locks, each with the command that deals with it.
Read-only, from the journal and the lock alone.
"""

from __future__ import annotations

from dsv4ops.journal.commands import command, recover_commands
from dsv4ops.journal.records import Kind
from dsv4ops.journal.store import UNKNOWN, Journal
from dsv4ops.remote.results import LockInfo


def attention_notes(journal: Journal, lock: LockInfo | None) -> list[str]:
    """Half-finished operations and stale locks, each with what to do."""
    notes = []
    recover: str | None = None  # read once, and only when an operation needs it
    flying = journal.in_flight()
    holder = lock.holder.get("op_id") if lock is not None and not lock.stale else None
    # A live A/B experiment holds the lock for the deploys nested in it (usecases/ab.py).
    parent = next((o for o in flying if o.op == holder and o.kind is Kind.EXPERIMENT), None)
    for op in flying:
        where = op.position
        ours = lock if lock is not None and lock.holder.get("op_id") == op.op else None
        if (ours is not None and not ours.stale) or (parent is not None and op is not parent):
            inside = (
                f", within {parent.kind.value} {parent.op}" if parent and op is not parent else ""
            )
            notes.append(
                f"{op.kind.value} {op.op} of {op.profile_name or '-'} is in progress ({where}{inside})"
            )
            continue
        why = (
            f"its process (pid {ours.holder.get('pid')}) is dead and left the deploy lock"
            if ours is not None
            else "it never finished"
        )
        recover = recover or recover_commands(journal)
        notes.append(
            f"{op.kind.value} {op.op} of {op.profile_name or '-'} was interrupted {where}: {why}. "
            f"Resolve it with {recover}"
        )
    unknown = journal.deployed_is_unknown()
    if unknown is not None and unknown.status.terminal and unknown.running == UNKNOWN:
        why = next(
            (ln for ln in (unknown.message or "").splitlines() if "interrupted" in ln),
            "",
        )
        good = journal.last_known_good()
        # rollback refuses with nothing known-good: then stopping is what makes the state known
        fix = (
            f"run {command('rollback', journal.target)} to restore the last known-good "
            f"deployment ({good.profile_name}, {good.op})"
            if good is not None
            else f"nothing is known-good to roll back to: run {command('stop', journal.target)} "
            f"to stop whatever runs, then {command('deploy', journal.target, 'PROFILE')}"
        )
        notes.append(
            f"{unknown.kind.value} {unknown.op} of {unknown.profile_name or '-'} ended "
            f"{unknown.status.value} without knowing what runs"
            + (f" ({why.rstrip('.')})" if why else "")
            + f"; {fix}"
        )
    if (
        lock is not None
        and lock.stale
        and not any(lock.holder.get("op_id") == o.op for o in journal.in_flight())
    ):
        notes.append(
            f"the deploy lock was left by dead process pid {lock.holder.get('pid')} "
            f"(operation {lock.holder.get('op_id')}); pass --recover to the next deploy/rollback/stop "
            f"({command('stop', journal.target, '--recover')}, say; it is cleared without asking "
            "when the journal shows that operation ended)"
        )
    return notes
