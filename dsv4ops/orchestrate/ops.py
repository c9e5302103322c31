"""Deploy, rollback and stop as whole operations: preflight, lock, journal, steps, auto-rollback.

`Operator.deploy` runs the safe order from plan.py. If any step fails after the old deployment
was touched, it stops whatever is up and redeploys the last known-good deployment by the same
path (start in order, wait ready, end-to-end probe), then reports what failed, what it did and
what runs now. Every outcome is an `Outcome`; a handled failure has ok=False (the CLI turns it
into exit code 2), only refusals before anything changed raise.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.errors import DsOpsError, LockHeldError, PreflightError, TargetError
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import UNKNOWN, Journal
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.control import TargetControl, holder_for
from dsv4ops.orchestrate.engine import (
    CanaryStep,
    Progress,
    Runner,
    RunSettings,
    StepFailed,
    Timeouts,
    process_snapshot,
)
from dsv4ops.orchestrate.kernelpkg import KernelSupport, with_kernel_env
from dsv4ops.orchestrate.model import START_ORDER, Deployment, deployment_from_record
from dsv4ops.orchestrate.pd import WARNING as PD_WARNING
from dsv4ops.orchestrate.pd import RestartScope, restart_scope
from dsv4ops.orchestrate.preflight import preflight_problems

KnownGood = tuple[Operation, Deployment]


@dataclass
class Outcome:
    ok: bool
    op_id: str | None
    kind: str
    status: str
    profile: str | None
    message: str
    running: str | None  # description of what runs now ("nothing", "unknown", profile @ commit)
    total_s: float = 0.0
    steps: list[dict[str, Any]] = field(default_factory=list)
    ready_wait_s: dict[str, float] = field(default_factory=dict)
    probe: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Operator:
    """Runs operations on one target. Everything it touches is injected."""

    def __init__(
        self,
        control: TargetControl,
        journal: Journal,
        *,
        host: str,
        clock: Clock | None = None,
        progress: Progress | None = None,
        timeouts: Timeouts | None = None,
        canary: CanaryStep | None = None,
        model: str = "default",
        command: str = "dsv4ops",
        accept_inconclusive: bool = False,
        kernels: KernelSupport | None = None,
    ) -> None:
        self.control = control
        self.journal = journal
        self.host = host
        self.command = command
        self.settings = RunSettings(
            clock=clock or SystemClock(),
            progress=progress or (lambda _line: None),
            timeouts=timeouts or Timeouts(),
            canary=canary,
            model=model,
            accept_inconclusive=accept_inconclusive,
            kernels=kernels,
        )

    # ------------------------------------------------------------------------------ deploy

    def deploy(
        self,
        new: Deployment,
        *,
        kind: Kind = Kind.DEPLOY,
        scope: RestartScope | None = None,
        reason: str | None = None,
        fallback: KnownGood | None = None,
        run_canary: bool = True,
        recover: bool = False,
    ) -> Outcome:
        """Deploy `new` in the safe order; auto-roll back to `fallback` on a failure."""
        t0 = self.settings.clock.monotonic()
        scope = scope or restart_scope(None)
        notes = [scope.note] if scope.note else []
        warning = scope.note if scope.note and scope.note.startswith(PD_WARNING) else None
        for n in notes:
            self.settings.progress(n if n == warning else f"note: {n}")
        self.settings.progress(f"preflight on {self.host}")
        problems = preflight_problems(
            self.control,
            new,
            scope.components,
            package_present=self.settings.kernels.present if self.settings.kernels else None,
        )
        if problems:
            raise PreflightError(
                f"preflight failed on {self.host}: "
                + "; ".join(problems)
                + ". Nothing was changed.",
            )
        new = self._with_kernel_env(new)
        op_id = self.journal.new_op_id(kind)
        notes += self._take_lock(op_id, recover)
        try:
            prev = self.journal.deployed()
            self.journal.begin(
                kind,
                op_id=op_id,
                profile=new.profile_record(),
                components=new.component_records(),
                reason=reason,
                undo=_undo(prev),
            )
            self.journal.transition(op_id, Status.RUNNING)
            if warning:
                self.journal.step(op_id, PD_WARNING, "done", detail=warning)
            self.settings.progress(f"{kind.value} {new.describe()} to {self.host} (journal {op_id})")
            runner = self._runner(op_id)
            runner.known = deployment_from_record(prev) if prev and prev.components else new
            with_canary = run_canary and self.settings.canary is not None
            steps = P.restart_steps(new, scope.components, canary=with_canary)
            try:
                runner.run(steps, new)
            except StepFailed as failure:
                out = self._fail(op_id, kind, new, runner, failure, fallback)
                out.notes = notes + out.notes
                out.total_s = self.settings.clock.monotonic() - t0
                return out
            processes = process_snapshot(self.control, list(START_ORDER))
            self.journal.step(op_id, "mark known-good", "done")
            self.journal.transition(
                op_id,
                Status.SUCCEEDED,
                running=op_id,
                processes=processes,
                message=(f"{warning}\n" if warning else "")
                + f"{new.describe()} deployed and known-good (commands {new.commands_hash[:12]})",
            )
            return Outcome(
                True,
                op_id,
                kind.value,
                Status.SUCCEEDED.value,
                new.profile_name,
                f"{new.describe()} is deployed, healthy and marked known-good",
                new.describe(),
                self.settings.clock.monotonic() - t0,
                _steps(runner),
                dict(runner.log.ready_wait_s),
                runner.log.probe_checks,
                notes,
            )
        finally:
            self._release_lock(op_id)

    def _fail(
        self,
        op_id: str,
        kind: Kind,
        new: Deployment,
        runner: Runner,
        failure: StepFailed,
        fallback: KnownGood | None,
    ) -> Outcome:
        what = f"{kind.value} of {new.describe()} failed at '{failure.step}': {failure.reason}"
        did = runner.log.done_titles()
        did_line = f"Done before the failure: {', '.join(did) or 'nothing'}."

        def outcome(status: Status, message: str, running: str) -> Outcome:
            return Outcome(
                False,
                op_id,
                kind.value,
                status.value,
                new.profile_name,
                message,
                running,
                steps=_steps(runner),
                ready_wait_s=dict(runner.log.ready_wait_s),
                probe=runner.log.probe_checks,
            )

        if not runner.log.changed:
            self.journal.transition(op_id, Status.FAILED, message=what)
            return outcome(
                Status.FAILED, f"{what}\nNothing was changed on the target.", "unchanged"
            )
        self.settings.progress(f"{what}\nrolling back: stopping router, decode, prefill")
        if any(t.action == P.START for t in runner.log.timings):
            # Some of the new components run now: drain through their ports, not the old ones'.
            runner.known = new
        try:
            runner.run(P.stop_steps(), None)
        except StepFailed as stop_failure:
            msg = (
                f"{what}\n{did_line}\nThe automatic rollback could not stop the old processes "
                f"({stop_failure}). Running now: unknown; run `dsv4ops status`."
            )
            self.journal.transition(op_id, Status.FAILED, message=msg, running=UNKNOWN)
            return outcome(Status.FAILED, msg, "unknown")
        if fallback is None:
            msg = (
                f"{what}\n{did_line}\nNo known-good deployment to roll back to, so everything "
                "was stopped. Running now: nothing."
            )
            self.journal.transition(op_id, Status.FAILED, message=msg, running="")
            return outcome(Status.FAILED, msg, "nothing")
        good_op, good = fallback
        try:
            good = self._with_kernel_env(good)
        except DsOpsError as exc:
            # Restore anyway: serving on default MoE configs beats serving nothing.
            self.settings.progress(f"note: cannot read the target's kernel package state ({exc})")
        self.settings.progress(
            f"rolling back to the last known-good deployment {good.describe()} ({good_op.op})"
        )
        try:
            runner.run(
                P.start_steps(good)
                + [P.Step(P.PROBE, "end-to-end probe of the restored deployment")],
                good,
            )
        except StepFailed as restore_failure:
            try:
                runner.run(P.stop_steps(), None)
                running, run_desc = "", "nothing (everything was stopped)"
            except StepFailed:
                running, run_desc = UNKNOWN, "unknown; run `dsv4ops status`"
            msg = (
                f"{what}\n{did_line}\nRolling back to {good.describe()} also failed at "
                f"'{restore_failure.step}': {restore_failure.reason}\nRunning now: {run_desc}."
            )
            self.journal.transition(op_id, Status.FAILED, message=msg, running=running)
            return outcome(Status.FAILED, msg, run_desc)
        processes = process_snapshot(self.control, list(START_ORDER))
        msg = (
            f"{what}\n{did_line}\nRolled back automatically to the last known-good deployment "
            f"{good.describe()} (journal {good_op.op}) by the same safe path; its end-to-end "
            f"probe passed.\nRunning now: {good.describe()}."
        )
        self.journal.transition(
            op_id, Status.ROLLED_BACK, message=msg, running=good_op.op, processes=processes
        )
        return outcome(Status.ROLLED_BACK, msg, good.describe())

    # ------------------------------------------------------------------------------ stop

    def stop(self, *, reason: str | None = None, recover: bool = False) -> Outcome:
        """Drain and stop router, decode, prefill; verify no process and no port is left."""
        t0 = self.settings.clock.monotonic()
        op_id = self.journal.new_op_id(Kind.STOP)
        notes = self._take_lock(op_id, recover)
        try:
            prev = self.journal.deployed()
            self.journal.begin(Kind.STOP, op_id=op_id, reason=reason, undo=_undo(prev))
            self.journal.transition(op_id, Status.RUNNING)
            self.settings.progress(f"stop everything on {self.host} (journal {op_id})")
            runner = self._runner(op_id)
            runner.known = deployment_from_record(prev) if prev and prev.components else None
            try:
                runner.run(P.stop_steps(), None)
            except StepFailed as failure:
                msg = f"stop failed at '{failure.step}': {failure.reason}\nRunning now: unknown."
                self.journal.transition(op_id, Status.FAILED, message=msg, running=UNKNOWN)
                return Outcome(
                    False,
                    op_id,
                    "stop",
                    "FAILED",
                    None,
                    msg,
                    "unknown",
                    self.settings.clock.monotonic() - t0,
                    _steps(runner),
                    notes=notes,
                )
            self.journal.transition(
                op_id, Status.SUCCEEDED, message="stopped; ports closed", running=""
            )
            return Outcome(
                True,
                op_id,
                "stop",
                "SUCCEEDED",
                None,
                "router, decode and prefill stopped; no process left, every port closed",
                "nothing",
                self.settings.clock.monotonic() - t0,
                _steps(runner),
                notes=notes,
            )
        finally:
            self._release_lock(op_id)

    # ------------------------------------------------------------------------------ lock

    def _take_lock(self, op_id: str, recover: bool) -> list[str]:
        """Acquire the deploy lock; resolve a half-finished operation when that is safe/asked."""
        notes: list[str] = []
        holder = holder_for(op_id, self.command)
        try:
            self.control.lock_acquire(holder)
        except LockHeldError as exc:
            held = dict(getattr(exc, "holder", {}) or {})
            stale = bool(getattr(exc, "stale", False))
            held_op = self._find(held.get("op_id"))
            ours = held.get("host") == socket.gethostname() and held.get("pid") == holder["pid"]
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
                    f"{exc}. {_interrupted(held_op)}",
                    hint="see `dsv4ops status`; resolve with `dsv4ops rollback --recover` (restore the "
                    "last known-good) or `dsv4ops deploy PROFILE --recover`",
                ) from None
            else:
                raise
            self.control.lock_acquire(holder, force=True)
        for op in self.journal.in_flight():
            msg = f"interrupted {op.position}; resolved by {op_id}"
            self.journal.transition(op.op, Status.ABANDONED, message=msg, running=UNKNOWN)
            notes.append(f"{op.kind.value} {op.op} of {op.profile_name or '-'} was {msg}")
        for n in notes:
            self.settings.progress(f"note: {n}")
        return notes

    def _release_lock(self, op_id: str) -> None:
        try:
            self.control.lock_release(op_id)
        except (TargetError, DsOpsError) as exc:
            # Left for the next command, which sees the journal says this op ended.
            self.settings.progress(f"warning: could not release the deploy lock ({exc})")

    def _find(self, op_id: Any) -> Operation | None:
        if not isinstance(op_id, str):
            return None
        return next((o for o in self.journal.operations() if o.op == op_id), None)

    def _with_kernel_env(self, deployment: Deployment) -> Deployment:
        """Add the env that makes the workers load the profile's kernel package (when named)."""
        ref = deployment.kernel_package
        if not ref or self.settings.kernels is None:
            return deployment
        env = dict(self.settings.kernels.env_for(ref))
        self.settings.progress(
            "kernel package " + ref + ": " + " ".join(f"{k}={v}" for k, v in sorted(env.items()))
        )
        return with_kernel_env(deployment, env)

    def _runner(self, op_id: str) -> Runner:
        return Runner(self.control, self.journal, op_id, self.settings)


def _interrupted(op: Operation | None) -> str:
    if op is None:
        return "The journal has no record of its operation"
    return f"The journal shows {op.kind.value} {op.op} of {op.profile_name or '-'} was interrupted {op.position}"


def _undo(prev: Operation | None) -> dict[str, Any]:
    if prev is None:
        return {"previous": None}
    return {
        "previous": prev.op,
        "previous_profile": prev.profile,
        "previous_components": prev.components,
    }


def _steps(runner: Runner) -> list[dict[str, Any]]:
    return [asdict(t) for t in runner.log.timings]


def summary_line(out: Outcome) -> str:
    return f"{out.kind} {out.status}: {out.message.splitlines()[0]} (total {out.total_s:.1f}s)"
