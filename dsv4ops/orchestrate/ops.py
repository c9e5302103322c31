"""Deploy, rollback and stop as whole operations: preflight, lock, journal, steps, auto-rollback.

`Operator.deploy` runs the safe order from plan.py. If any step fails after the old deployment
was touched, it stops whatever is up and redeploys the last known-good deployment by the same
path (start in order, wait ready, end-to-end probe), then reports what failed, what it did and
what runs now. Every outcome is an `Outcome`; a handled failure has ok=False (the CLI turns it
into exit code 2), only refusals before anything changed raise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.deployment import START_ORDER, Deployment
from dsv4ops.errors import DsOpsError, PreflightError
from dsv4ops.journal.commands import command
from dsv4ops.journal.gates import GateSource
from dsv4ops.journal.records import Kind, Status, undo_of
from dsv4ops.journal.store import UNKNOWN, Journal, gate_source
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate import unrecorded as U
from dsv4ops.orchestrate.autorollback import KnownGood, known_good_candidates, roll_back
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.engine import (
    CanaryStep,
    Interrupted,
    Progress,
    Runner,
    RunSettings,
    StepFailed,
    process_snapshot,
)
from dsv4ops.orchestrate.interrupts import signal_name_of
from dsv4ops.orchestrate.kernelpkg import KernelSupport, with_kernel_env
from dsv4ops.orchestrate.operation import (
    RunningOperation,
    journaled_operation,
    nested_operation,
)
from dsv4ops.orchestrate.outcome import Outcome as Outcome  # re-exported: ops.Outcome
from dsv4ops.orchestrate.partial import ScopeRecord, describe_mix, is_mixed, unit_after
from dsv4ops.orchestrate.pd import WARNING as PD_WARNING
from dsv4ops.orchestrate.pd import RestartScope, restart_scope
from dsv4ops.orchestrate.preflight import preflight_problems
from dsv4ops.orchestrate.timeouts import Timeouts
from dsv4ops.waits import QUIET, WaitObserver


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
        waits: WaitObserver = QUIET,
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
            waits=waits,
        )

    # ------------------------------------------------------------------------------ deploy

    def deploy(
        self,
        new: Deployment,
        *,
        kind: Kind = Kind.DEPLOY,
        scope: RestartScope | None = None,
        reason: str | None = None,
        fallback: KnownGood | Sequence[KnownGood] | None = None,
        run_canary: bool = True,
        recover: bool = False,
        within: RunningOperation | None = None,
    ) -> Outcome:
        """Deploy `new` in the safe order; on a failure or an interrupt (SIGINT/SIGTERM), roll
        back automatically to `fallback` (one known-good, or a list tried in order). `within`:
        the operation (an A/B experiment) that holds the deploy lock for this deploy."""
        with self.settings.interrupts.installed():
            return self._deploy(
                new,
                kind,
                scope or restart_scope(None),
                reason,
                known_good_candidates(fallback),
                run_canary,
                recover,
                within,
            )

    def _deploy(
        self,
        new: Deployment,
        kind: Kind,
        scope: RestartScope,
        reason: str | None,
        candidates: list[KnownGood],
        run_canary: bool,
        recover: bool,
        within: RunningOperation | None = None,
    ) -> Outcome:
        t0 = self.settings.clock.monotonic()
        notes = [scope.note] if scope.note else []
        warning = scope.note if scope.note and scope.note.startswith(PD_WARNING) else None
        for n in notes:
            self.settings.progress(n if n == warning else f"note: {n}")
        self._preflight(new, scope)
        new = self._with_kernel_env(new)
        # One source of the order: the plan `--dry-run` prints. Its bracket (preflight, lock,
        # journal, mark, unlock) is this method and the operation context; the runner runs the
        # rest (drain, stop router/decode/prefill, start prefill/decode/router, probe, canary).
        with_canary = run_canary and self.settings.canary is not None
        steps = P.engine_steps(P.deploy_plan(new, scope.components, canary=with_canary))
        unit_after(new, scope, self.journal.deployed(), self.journal.target)  # refuse if nothing
        with self._operation(kind, recover, within) as op:
            notes += op.notes
            prev = self.journal.deployed()  # again: under the lock, nobody changes it now
            unit, scope_record = unit_after(new, scope, prev, self.journal.target)
            op.begin(
                profile=unit.profile_record(),
                components=unit.component_records(),
                reason=reason,
                undo=undo_of(prev),
                scope=None if scope_record is None else dict(scope_record),
            )
            if warning:
                op.step(PD_WARNING, "done", detail=warning)
            runner = self._runner(op.op_id, gate_source(kind, recover))
            try:  # from here on, a signal is a failure like any other: journaled and handled
                op.gate.raise_held()
                self.settings.progress(
                    f"{kind.value} {new.describe()} to {self.host} (journal {op.op_id})"
                )
                runner.known = prev.deployment() if prev and prev.components else new
                runner.run(steps, new)
                return self._succeeded(op, new, unit, scope_record, warning, runner, notes, t0)
            except (StepFailed, KeyboardInterrupt) as exc:
                return self._failed(exc, runner, op, kind, new, candidates, notes, t0)
            except U.JournalLost as lost:
                return U.unrecorded_outcome(
                    op, self.control, lost, runner.log, new, notes, self._took(t0)
                )

    def _preflight(self, new: Deployment, scope: RestartScope) -> None:
        """Refuse (PreflightError, nothing changed) when the target cannot take `new`."""
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

    def _failed(
        self,
        exc: BaseException,
        runner: Runner,
        op: RunningOperation,
        kind: Kind,
        new: Deployment,
        candidates: list[KnownGood],
        notes: list[str],
        t0: float,
    ) -> Outcome:
        """A step failed or a signal arrived: roll back automatically (autorollback.py)."""
        failure = (
            exc
            if isinstance(exc, StepFailed)
            else Interrupted("", signal_name_of(exc), finished=True)
        )
        op_id = op.op_id
        try:
            ending = roll_back(
                runner,
                op_id=op_id,
                kind=kind,
                new=new,
                failure=failure,
                candidates=candidates,
                prepare=self._restorable,
            )
        except U.JournalLost as lost:  # the rollback's steps cannot be recorded either
            return U.unrecorded_outcome(
                op, self.control, lost, runner.log, new, notes, self._took(t0)
            )
        out = self._outcome(
            ok=False, op_id=op_id, kind=kind, status=ending.status, new=new,
            message=ending.message, running=ending.running, runner=runner, notes=notes, t0=t0,
        )  # fmt: skip
        out.interrupted = ending.interrupted or bool(self.settings.interrupts.received)
        return out

    def _succeeded(
        self,
        operation: RunningOperation,
        new: Deployment,
        unit: Deployment,
        scope_record: ScopeRecord | None,
        warning: str | None,
        runner: Runner,
        notes: list[str],
        t0: float,
    ) -> Outcome:
        """Journal the end of a deploy whose steps all passed. Known-good only on the whole unit
        started from `new`'s rendered commands and proven through the router (the probe ran)."""
        op_id, kind = operation.op_id, operation.kind
        proven = any(t.action == P.PROBE and t.ok for t in runner.log.timings)
        known_good = scope_record is None and proven
        if known_good:  # proven; known-good is the journal's rule (gate, experiment, ...)
            text, first = (
                f"{new.describe()} deployed and proven (commands {new.commands_hash[:12]})",
                "",
            )
        else:
            op = self.journal.get(op_id)
            runs = (
                describe_mix(op) if is_mixed(op) else f"the unit runs {new.describe()}'s commands"
            )
            text = first = (
                f"{', '.join(scope_record['restarted'] if scope_record else [])} of "
                f"{new.describe()} restarted and serving (end-to-end probe passed); NOT marked "
                f"known-good: a partial restart is not a proven unit ({runs})"
            )
        with operation.gate.shielded(), U.journal_lost_as("journal the outcome"):
            processes = process_snapshot(self.control, list(START_ORDER))
            if known_good:
                self.journal.step(op_id, "mark known-good", "done")
            self.journal.transition(
                op_id,
                Status.SUCCEEDED,
                running=op_id,
                processes=processes,
                message=(f"{warning}\n" if warning else "") + text,
                known_good=known_good,
            )
        operation.ended = True
        if known_good:
            judged = self.journal.judged().get(op_id)
            first = f"{new.describe()} is deployed and healthy; " + (
                judged.why if judged else "not judged"
            )
        return self._outcome(
            ok=True, op_id=op_id, kind=kind, status=Status.SUCCEEDED, new=new, message=first,
            running=unit.describe(), runner=runner, notes=notes, t0=t0,
        )  # fmt: skip

    def _outcome(
        self,
        *,
        ok: bool,
        op_id: str,
        kind: Kind,
        status: Status,
        new: Deployment,
        message: str,
        running: str,
        runner: Runner,
        notes: list[str],
        t0: float,
    ) -> Outcome:
        return Outcome(
            ok=ok,
            op_id=op_id,
            kind=kind.value,
            status=status.value,
            profile=new.profile_name,
            message=message,
            running=running,
            total_s=self.settings.clock.monotonic() - t0,
            steps=runner.log.as_json(),
            ready_wait_s=dict(runner.log.ready_wait_s),
            probe=runner.log.probe_checks,
            notes=notes,
        )

    def _took(self, t0: float) -> float:
        return self.settings.clock.monotonic() - t0

    def _restorable(self, good: Deployment) -> Deployment:
        try:
            return self._with_kernel_env(good)
        except DsOpsError as exc:
            # Restore anyway: serving on default MoE configs beats serving nothing.
            self.settings.progress(f"note: cannot read the target's kernel package state ({exc})")
            return good

    # ------------------------------------------------------------------------------ stop

    def stop(self, *, reason: str | None = None, recover: bool = False) -> Outcome:
        """Drain and stop router, decode, prefill; verify no process and no port is left."""
        with self.settings.interrupts.installed():
            return self._stop(reason, recover)

    def _stop(self, reason: str | None, recover: bool) -> Outcome:
        t0 = self.settings.clock.monotonic()
        with self._operation(Kind.STOP, recover) as op:
            prev = self.journal.deployed()
            op.begin(reason=reason, undo=undo_of(prev))
            self.settings.progress(f"stop everything on {self.host} (journal {op.op_id})")
            runner = self._runner(op.op_id)
            runner.known = prev.deployment() if prev and prev.components else None
            ok, status, running, msg = True, Status.SUCCEEDED, "", "stopped; ports closed"
            try:
                op.gate.raise_held()
                runner.run(P.engine_steps(P.stop_steps()), None)
            except (StepFailed, KeyboardInterrupt) as exc:
                ok, status, running = False, Status.FAILED, UNKNOWN
                msg = _stop_failure(exc, self.journal.target)
            except U.JournalLost as lost:
                msg, _ = U.stop_unrecorded(op, self.control, lost, "stop")
                ok, status, running = False, Status.FAILED, UNKNOWN
            if not op.ended:
                op.finish(status, message=msg, running=running)
            return Outcome(
                ok=ok,
                op_id=op.op_id,
                kind="stop",
                status=status.value,
                profile=None,
                message=msg
                if not ok
                else "router, decode and prefill stopped; no process left, every port closed",
                running="nothing" if ok else "unknown",
                total_s=self.settings.clock.monotonic() - t0,
                steps=runner.log.as_json(),
                notes=op.notes,
                interrupted=bool(op.gate.received),
            )

    # ------------------------------------------------------------------------------ helpers

    def _operation(
        self, kind: Kind, recover: bool, within: RunningOperation | None = None
    ) -> contextlib.AbstractContextManager[RunningOperation]:
        """The journaled-operation context (operation.py) with this operator's gate and lock
        (inside `within`, which holds the lock: nested_operation)."""
        if within is not None:
            return nested_operation(self.journal, kind, within, gate=self.settings.interrupts)
        return journaled_operation(
            self.control,
            self.journal,
            kind,
            command=self.command,
            recover=recover,
            progress=self.settings.progress,
            gate=self.settings.interrupts,
        )

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

    def _runner(self, op_id: str, source: GateSource = GateSource.DEPLOY) -> Runner:
        return Runner(self.control, self.journal, op_id, self.settings, source)


def _stop_failure(exc: BaseException, target: str) -> str:
    if isinstance(exc, StepFailed) and not isinstance(exc, Interrupted):
        return f"stop failed at '{exc.step}': {exc.reason}\nRunning now: unknown."
    where = exc.step if isinstance(exc, StepFailed) else "its start"
    return (
        f"stop was interrupted by {signal_name_of(exc)} at '{where}'.\nRunning "
        f"now: unknown (some components may be up); run {command('stop', target)} to finish."
    )
