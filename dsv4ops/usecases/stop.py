"""`stop`: drain and stop router, decode, prefill under the journaled-operation context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from dsv4ops.orchestrate.engine import Progress
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.outcome import raise_for as raise_for  # the CLI's exit for an Outcome
from dsv4ops.orchestrate.plan import Step, plan_json, render_plan, stop_steps
from dsv4ops.usecases.compose import operator_for
from dsv4ops.usecases.session import TargetSession


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


class StopPlanRecord(TypedDict):
    """The `stop --dry-run --json` document (StopPlan.to_json)."""

    dry_run: bool
    target: str
    plan: list[dict[str, object]]


@dataclass(frozen=True)
class StopPlan:
    """`stop --dry-run`: the target and the steps `stop` runs, printed as `deploy --dry-run`
    prints a deploy's (plan.py: one source)."""

    target: str
    steps: list[Step]

    def to_json(self) -> StopPlanRecord:
        return {"dry_run": True, "target": self.target, "plan": plan_json(self.steps)}

    def lines(self) -> list[str]:
        head = f"plan: stop everything on {self.target} (dry run: nothing is changed)"
        return [head, *render_plan(self.steps)]


def stop_plan(target_name: str | None) -> StopPlan:
    """The target's name and the steps `stop` runs (drain, router, decode, prefill). Nothing is
    read from the target."""
    from dsv4ops.profiles import get_target

    return StopPlan(get_target(target_name).name, stop_steps())
