"""`stop`: drain and stop router, decode, prefill under the journaled-operation context."""

from __future__ import annotations

from dsv4ops.orchestrate.engine import Progress
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.plan import Step, stop_steps
from dsv4ops.orchestrate.usecases.compose import operator_for
from dsv4ops.orchestrate.usecases.session import TargetSession


def run_stop(
    session: TargetSession,
    *,
    progress: Progress,
    recover: bool = False,
    reason: str | None = None,
) -> Outcome:
    """Stop the whole deployment in the safe order; verify no process and no port is left."""
    operator = operator_for(
        session, progress=progress, canary=None, model="default", command="dsv4ops stop"
    )
    return operator.stop(reason=reason, recover=recover)


def stop_plan(target_name: str | None) -> tuple[str, list[Step]]:
    """`stop --dry-run`: the target's name and the steps `stop` runs (drain, router, decode,
    prefill), as `deploy --dry-run` shows a deploy's (plan.py: one source). Nothing is read
    from the target."""
    from dsv4ops.profiles import get_target

    return get_target(target_name).name, stop_steps()
