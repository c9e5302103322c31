"""`rollback [--to ID|REV]`: rebuild the recorded deployment exactly (git at its commit, else the
journal's commands) and redeploy it by the deploy's safe path, with the next known-good ones as
the automatic fallbacks."""

from __future__ import annotations

from dataclasses import dataclass

from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.records import Judgement, Kind, Operation, judged_json
from dsv4ops.orchestrate.engine import CanaryStep, Progress
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.outcome import raise_for as raise_for  # the CLI's exit for an Outcome
from dsv4ops.orchestrate.restore import fallbacks_for, rebuild, rollback_target
from dsv4ops.usecases.compose import operator_for
from dsv4ops.usecases.deploy import require_router_key
from dsv4ops.usecases.gate import buckets_of, canary_gate, thresholds_of
from dsv4ops.usecases.render import render_at_commit
from dsv4ops.usecases.session import TargetSession


@dataclass(frozen=True)
class RollbackChoice:
    """The journal operation to restore, its rebuilt deployment, and how it was rebuilt."""

    op: Operation
    deployment: Deployment
    how: str

    def question(self, target_name: str) -> str:
        return f"roll back {target_name} to {self.deployment.describe()} ({self.op.op})?"

    def to_json(self, target_name: str, judged: Judgement | None) -> dict[str, object]:
        """The `rollback --dry-run --json` document: what it would restore and whether (and
        why) that is known-good, as journal/knowngood.py judges it."""
        return {
            "dry_run": True,
            "target": target_name,
            "op": self.op.op,
            "profile": self.deployment.profile_name,
            "commit": self.deployment.git_commit,
            "commands_hash": self.deployment.commands_hash,
            "how": self.how,
            **judged_json(judged, "not known-good: not a deployment"),
        }


def choose_rollback(session: TargetSession, to: str | None) -> RollbackChoice:
    """The last known-good deployment (or `to`: a journal id prefix or git commit), rebuilt.
    Raises RollbackTargetError (exit 1) when `to` names nothing restorable."""
    op = rollback_target(session.journal, to)
    dep, how = rebuild(op, render_at_commit(session.target))
    return RollbackChoice(op, dep, how)


def refuse_nothing_to_recover(session: TargetSession, choice: RollbackChoice) -> None:
    """`rollback --recover` with nothing to recover (no operation left unfinished, no lock
    held) refuses and changes nothing: the operator asked to recover, not for an ordinary
    rollback (issue 40: after an interrupted A/B had restored A, `--recover` moved the box to an
    older known-good)."""
    if session.journal.in_flight() or session.supervisor.lock_info() is not None:
        return
    name = session.target.name
    raise DsOpsError(
        f"nothing to recover on {name}: no operation was left unfinished and the deploy lock "
        "is free. Nothing was changed",
        hint=f"`dsv4ops status --target {name}` shows what runs; "
        f"`dsv4ops rollback --target {name}` (without --recover) rolls back to {choice.op.op} "
        f"({choice.deployment.describe()})",
    )


def run_rollback(
    session: TargetSession,
    choice: RollbackChoice,
    *,
    progress: Progress,
    canary: bool = False,
    recover: bool = False,
    reason: str | None = None,
) -> Outcome:
    dep, op = choice.deployment, choice.op
    require_router_key(dep)  # its router's key unreadable here: refused before anything stops
    # its recorded canary and probe sections, which its probe and gate read, unreadable (a
    # hand-edited line): RecordedSettingError before anything stops, never a guessed default
    dep.check_recorded()
    progress(f"rollback target: {op.op} ({dep.describe()}), rebuilt from {choice.how}")
    # If the target fails too, the next known-good ones are tried, whether or not anything ran
    # before: with nothing running, stopping everything is the worst outcome, not the plan.
    fallback = fallbacks_for(
        session.journal, render_at_commit(session.target), exclude_op=op.op, progress=progress
    )
    step: CanaryStep | None = None
    if canary:
        step = canary_gate(
            None,
            thresholds=thresholds_of(dep),  # the restored deployment's own, as recorded
            buckets=buckets_of(dep),
            model=dep.model_name,
            duration_s=None,  # its canary.gate_duration_s
            progress=progress,
        )
    operator = operator_for(
        session, progress=progress, canary=step, model=dep.model_name, command="dsv4ops rollback"
    )
    return operator.deploy(
        dep,
        kind=Kind.ROLLBACK,
        reason=reason or f"rollback to {op.op}",
        fallback=fallback,
        run_canary=canary,
        recover=recover,
    )
