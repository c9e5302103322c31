"""`deploy PROFILE`: render, plan (what --dry-run prints is what runs), then the operation with
its canary gate and the known-good fallbacks the automatic rollback walks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from dsv4ops.apikey import ApiKeyError, read_key
from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.commands import command
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.engine import CanaryStep, Progress
from dsv4ops.orchestrate.operation import RunningOperation
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.outcome import raise_for as raise_for  # the CLI's exit for an Outcome
from dsv4ops.orchestrate.pd import WARNING, RestartScope, restart_scope
from dsv4ops.orchestrate.restore import fallbacks_for
from dsv4ops.profiles.model import Target
from dsv4ops.usecases.compose import operator_for
from dsv4ops.usecases.endpoint import refuse_on_endpoint
from dsv4ops.usecases.gate import buckets_of, canary_gate, thresholds_of
from dsv4ops.usecases.render import deployment_for, render_at_commit
from dsv4ops.usecases.session import TargetSession

# The lone-PD-worker warning (orchestrate/pd.py), a note the CLI repeats after the result.
PD_WARNING = WARNING


class DeployPlanRecord(TypedDict):
    """The `deploy --dry-run --json` document (DeployPlan.to_json)."""

    dry_run: bool
    target: str
    profile: str
    commit: str | None
    commands_hash: str
    note: str | None
    warnings: list[str]  # the profile's known hazards, as `profile validate` says them
    plan: list[dict[str, object]]


@dataclass(frozen=True)
class DeployPlan:
    """What a deploy would do: the rendered deployment, the restart scope and the steps."""

    target: Target
    deployment: Deployment
    scope: RestartScope
    steps: list[P.Step]

    def to_json(self) -> DeployPlanRecord:
        """The `deploy --dry-run --json` document."""
        return {
            "dry_run": True,
            "target": self.target.name,
            "profile": self.deployment.profile_name,
            "commit": self.deployment.git_commit,
            "commands_hash": self.deployment.commands_hash,
            "note": self.scope.note,
            "warnings": self.warnings(),
            "plan": P.plan_json(self.steps),
        }

    def lines(self) -> list[str]:
        """The human-readable dry run: the header, the restart note, the numbered steps."""
        out = [
            f"plan: deploy {self.deployment.describe()} to {self.target.name} "
            "(dry run: nothing is changed)"
        ]
        if self.scope.note:
            out.append(f"note: {self.scope.note}")
        return out + [f"warning: {w}" for w in self.warnings()] + P.render_plan(self.steps)

    def warnings(self) -> list[str]:
        """The profile's warnings (known hazards, soft rules), `where: message` as `profile
        validate` prints them: said before a deploy asks or starts, and in its dry run."""
        return [str(w) for w in self.deployment.warnings]


def plan_deploy(
    profile_ref: str,
    target_name: str | None,
    *,
    only: Sequence[str] = (),
    allow_partial_pair: bool = False,
    canary: bool = True,
) -> DeployPlan:
    """Render PROFILE for the target and plan its deploy; touches nothing. Raises DsOpsError."""
    from dsv4ops.profiles import get_target

    target = get_target(target_name)
    refuse_on_endpoint(target, "deploy", profile_ref)  # before rendering: nothing to plan
    new = deployment_for(profile_ref, target)
    scope = restart_scope(only, allow_partial_pair=allow_partial_pair)
    return DeployPlan(target, new, scope, P.deploy_plan(new, scope.components, canary=canary))


def check_restart(session: TargetSession, plan: DeployPlan) -> None:
    """`deploy --restart`: what runs is restarted as it is, so the plan's commands must be the
    deployed unit's (its commands hash, as journaled). A runbook's restart names the deployed
    profile by hand (`--var profile=...`); a wrong one would have deployed another profile under
    the name of a restart. Checked before the deploy takes the lock: another operator's deploy
    in between is what the deploy then replaces, as any deploy does. Raises DsOpsError, nothing
    changed."""
    target = session.target.name
    running = session.journal.deployed()
    unknown = session.journal.deployed_is_unknown() if running is None else None
    if unknown is not None:  # the journal's last word: an operation that left it unknown
        raise DsOpsError(
            f"--restart: what runs on {target} is unknown ({unknown.kind.value} {unknown.op} "
            "ended without knowing): a restart of it cannot be proved to change nothing. "
            "Nothing was changed.",
            hint=f"{command('status', target)} shows what runs; deploy a profile without --restart",
        )
    if running is None:
        raise DsOpsError(
            f"--restart: the journal records nothing running on {target}; there is nothing to "
            "restart. Nothing was changed.",
            hint=f"deploy a profile without --restart; {command('status', target)} shows what runs",
        )
    was = running.profile or {}
    if was.get("commands_hash") == plan.deployment.commands_hash:
        return
    name = running.profile_name or "-"
    exactly = command("rollback", target, "--to", running.op)
    if name == plan.deployment.profile_name:  # the same profile, changed since it was deployed
        hint = (
            f"restart exactly what runs with {exactly} (rebuilt from the journal, at its "
            f"commit); or deploy {name} without --restart to apply the change"
        )
    else:
        hint = (
            f"restart what runs: {command('deploy', target, name, '--restart')} (or {exactly}); "
            f"or deploy {plan.deployment.profile_name} as the change it is, without --restart"
        )
    raise DsOpsError(
        f"--restart: {plan.deployment.describe()} renders other commands than what runs on "
        f"{target} ({name} @ {str(was.get('git_commit') or 'uncommitted')[:12]}, deployed by "
        f"{running.op}): a restart changes nothing else. Nothing was changed.",
        hint=hint,
    )


def require_router_key(d: Deployment) -> None:
    """Refuse before anything changes when the router's key cannot be read here: found only
    when the router starts, the old unit would already be stopped."""
    if d.router_key is None:
        return
    try:
        read_key(d.router_key)
    except ApiKeyError as exc:
        raise ApiKeyError(
            f"{exc.message}; nothing was stopped or started, what runs is unchanged",
            hint=exc.hint,
        ) from None


def run_deploy(
    session: TargetSession,
    plan: DeployPlan,
    *,
    command: str,
    progress: Progress,
    canary: bool = True,
    canary_duration_s: float | None = None,
    accept_inconclusive: bool = False,
    recover: bool = False,
    reason: str | None = None,
    within: RunningOperation | None = None,
) -> Outcome:
    """Deploy the planned deployment; a failure or interrupt rolls back (see ops.Operator).
    `canary_duration_s`: seconds of each flag-aware suite (None: the profile's
    `canary.gate_duration_s`). `within`: the operation holding the deploy lock for it (an A/B
    experiment's block)."""
    new = plan.deployment
    require_router_key(new)
    step: CanaryStep | None = None
    if canary:
        prev = session.journal.deployed()
        step = canary_gate(
            prev.deployment() if prev and prev.components else None,
            thresholds=thresholds_of(new),
            buckets=buckets_of(new),
            model=new.model_name,
            duration_s=canary_duration_s,
            progress=progress,
        )
    operator = operator_for(
        session,
        progress=progress,
        canary=step,
        model=new.model_name,
        command=command,
        accept_inconclusive=accept_inconclusive,
    )
    fallback = fallbacks_for(session.journal, render_at_commit(session.target), progress=progress)
    return operator.deploy(
        new,
        scope=plan.scope,
        reason=reason,
        fallback=fallback,
        run_canary=canary,
        recover=recover,
        within=within,
    )
