"""`twin hazard NAME --state S`: switch one twin hazard as a journaled operation under the lock.

The switch takes the same deploy lock as a deploy, rollback, stop or kernel switch, through the
same operation context (operation.py): it cannot race a deploy (a live holder refuses it, named),
a dead holder's lock is resolved the same way, an operation the journal shows never ended blocks
it, and a switch whose CLI died mid-way is left RUNNING under a dead holder's lock, so the next
`deploy|rollback|stop --recover` reports it ABANDONED like any other interrupted operation.
Journaled as a HAZARD operation once the lock is held (a refusal by the lock changed nothing):
SUCCEEDED, FAILED when the twin did not take it, ABANDONED when a signal cut it before the twin
answered (whether it took the switch is unknown).
"""

from __future__ import annotations

from dsv4ops.errors import DsOpsError
from dsv4ops.journal.records import Kind, Status
from dsv4ops.orchestrate.engine import Progress
from dsv4ops.orchestrate.interrupts import signal_name_of
from dsv4ops.orchestrate.operation import journaled_operation
from dsv4ops.usecases.session import TargetSession


def switch_hazard(
    session: TargetSession,
    *,
    hazard: str,
    state: str,
    progress: Progress,
    reason: str | None = None,
) -> dict[str, object]:
    """Send the switch under the deploy lock; {"hazard", "state", "component", "hazards": the
    twin's states, "op"}. Raises LockHeldError when the lock is held or an operation never
    ended, DsOpsError when nothing is deployed, HazardNotTakenError (exit 2) when the twin
    refuses."""
    from dsv4ops.runbooks.hazard import plan_hazard, send_hazard

    name = session.target.name
    why = f"{hazard} {state}" + (f": {reason}" if reason else "")
    with journaled_operation(
        session.supervisor,
        session.journal,
        Kind.HAZARD,
        command=f"dsv4ops twin hazard {hazard} --state {state}",
        progress=progress,
    ) as op:
        planned = plan_hazard(session.journal, target=name, hazard=hazard, state=state)
        op.begin(reason=why)
        try:
            op.gate.raise_held()
            out = send_hazard(session.supervisor, planned)
        except KeyboardInterrupt as exc:
            op.finish(
                Status.ABANDONED,
                message=f"interrupted by {signal_name_of(exc)} before the twin answered",
            )
            raise
        except DsOpsError as exc:
            op.finish(Status.FAILED, message=str(exc)[:300])
            raise
        op.finish(Status.SUCCEEDED, message=f"{planned['component']}: {why}")
    return {**out, "op": op.op_id}
