"""`dsv4ops ab A B`: a time-multiplexed A/B of two profiles on one target, journaled as one
experiment.

The experiment is an operation of its own (Kind.EXPERIMENT) that holds the target's deploy lock
from the first block to the end, so nobody deploys between its blocks. Each block deploys its arm
through the deploy use case (the whole PD unit in the safe order, proven by a generation; the
canary gate is the experiment's, not the deploy's), nested in the experiment: every block's
deploy is a DEPLOY in the journal whose reason names the experiment, and the experiment's steps
name every block's deploy. B's correctness gates run once, right after B's first measured block
(the next block redeploys, so a wedge they provoke spoils no measurement). After every A/B pair
the sequential design looks (ab.sequential, ab.decision.settled): a failed gate, B shown worse,
better, or equivalent ends the experiment there (journaled as a `look` step), else it goes on to
the budget. The end leaves the box on the winner (A when inconclusive, partial or unsafe) through
the same deploy path.

Interrupted (a signal, a deploy that failed and rolled back, a suite that could not run): the
blocks done are analysed as a partial experiment, the box is put back on A by a deploy (unless
the rollback already left it there), the report is written marked partial, and the experiment ends
FAILED naming the blocks done. A second signal reaches whichever deploy runs then, which handles
it as `dsv4ops deploy` does. A CLI that dies leaves the experiment in flight: the next command
refuses until `--recover` marks it ABANDONED, as for a deploy.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dsv4ops.clock import utc_now_iso
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.commands import command as printed  # `command`: the lock holder's
from dsv4ops.journal.records import Kind, Status
from dsv4ops.orchestrate.engine import Progress
from dsv4ops.orchestrate.interrupts import signal_name_of
from dsv4ops.orchestrate.operation import RunningOperation, journaled_operation
from dsv4ops.usecases.ab_blocks import (
    Measured,
    SuiteRun,
    canary_runner,
    choose_sources,
    gate_on_b,
    journal_measured,
    measure,
    measured_gate,
)
from dsv4ops.usecases.ab_outcome import ABOutcome as ABOutcome  # re-exported
from dsv4ops.usecases.ab_outcome import raise_for as raise_for  # the CLI's exit
from dsv4ops.usecases.ab_plan import ABPlan, final_gate_suite_s
from dsv4ops.usecases.deploy import run_deploy
from dsv4ops.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.ab.analysis import Analysis
    from dsv4ops.ab.decision import Decision, GateResult
    from dsv4ops.ab.model import Arm, BlockResult
    from dsv4ops.canary import SuiteResult


def run_ab(
    session: TargetSession,
    plan: ABPlan,
    *,
    progress: Progress,
    command: str,
    run: SuiteRun | None = None,
    reason: str | None = None,
    accept_inconclusive: bool = False,
) -> ABOutcome:
    """Run the planned experiment (blocking); see the module docstring. `accept_inconclusive`
    is deploy's `--accept-inconclusive-canary` for the winner's final gated deploy."""
    with journaled_operation(
        session.supervisor, session.journal, Kind.EXPERIMENT, command=command, progress=progress
    ) as op:
        a, b = plan.profile("A"), plan.profile("B")
        op.begin(
            profile={"name": f"{a} vs {b}", "a": a, "b": b},
            reason=(f"{reason}; " if reason else "")
            + f"A/B {a} vs {b}: {''.join(plan.schedule)}, canary {plan.suite} at "
            f"{','.join(map(str, plan.levels))}",
        )
        op.step("plan", "done", detail=plan.detail())
        try:
            return _Experiment(
                session, plan, op, progress, run or canary_runner(progress), accept_inconclusive
            ).run()
        except Exception as exc:  # a bug: the journal still says the experiment ended, and how
            if not op.ended:
                op.finish(
                    Status.FAILED,
                    message=f"the experiment crashed: {type(exc).__name__}: "
                    f"{_first(str(exc))}; see {printed('status', session.journal.target)} for what runs",
                )
            raise


class _Experiment:
    def __init__(
        self,
        session: TargetSession,
        plan: ABPlan,
        op: RunningOperation,
        progress: Progress,
        run: SuiteRun,
        accept_inconclusive: bool = False,
    ) -> None:
        self.session, self.plan, self.op, self.say = session, plan, op, progress
        self.run_suite = run
        self.blocks: list[BlockResult] = []  # values filled in at the end (choose_sources)
        self.measured: list[Measured] = []  # of the complete blocks, in order
        self.gates: list[GateResult] = []
        self.b_results: list[SuiteResult] = []  # B's measured suites (a bucket change's gate)
        self.deploys: dict[str, list[str]] = {"A": [], "B": []}
        self.gated_since_deploy = False
        self.accept_inconclusive = accept_inconclusive  # --accept-inconclusive-canary
        self.interrupted: str | None = None
        self.failure: str | None = None

    def run(self) -> ABOutcome:
        try:
            self.op.gate.raise_held()
            for index, arm in enumerate(self.plan.schedule):
                if not self._block(index, arm):
                    break
                if index % 2 == 1 and self._look(index):
                    break
        except KeyboardInterrupt as exc:
            self.interrupted = f"interrupted by {signal_name_of(exc)}"
        except DsOpsError as exc:
            self.failure = (str(exc).splitlines() or [type(exc).__name__])[0]
        except Exception as exc:  # a bug in dsv4ops: A goes back on the box before it is raised
            self._restore_after_crash(exc)
            raise
        with self.op.gate.holding():  # the end is journaled whatever arrives meanwhile (a deploy
            return self._end()  # it runs installs its own handler: a signal then is the deploy's)

    def _restore_after_crash(self, exc: Exception) -> None:
        """Put A back and journal the crash with what runs now (issue 40); the CLI's bug
        boundary then reports the crash itself (exit 3)."""
        why = f"the experiment crashed: {type(exc).__name__}: {_first(str(exc))}"
        self.say(f"{why}; putting A back on the box")
        with self.op.gate.holding():
            try:
                box, _ = self._leave_on("A")
            except Exception as again:  # noqa: BLE001 - said and journaled; the crash is raised
                box = f"unknown (putting A back failed too: {type(again).__name__}: {again})"
            self.op.finish(Status.FAILED, message=f"{why}; the box runs {box}")
        self.say(f"the box runs {box}")

    def _block(self, index: int, arm: Arm) -> bool:
        """Deploy, warm up, measure; False when the experiment must stop (journaled why)."""
        from dsv4ops.ab.model import BlockResult

        plan, profile = self.plan, self.plan.profile(arm)
        name = f"block {index} {arm} {profile}"
        self.op.step(name, "start")
        self.op.gate.raise_held()
        self.say(f"== block {index + 1}/{len(plan.schedule)}: {arm} ({profile})")
        out = run_deploy(
            self.session,
            plan.a if arm == "A" else plan.b,
            command=f"dsv4ops ab (experiment {self.op.op_id})",
            progress=self.say,
            canary=False,
            reason=f"experiment {self.op.op_id}: block {index} ({arm})",
            within=self.op,
        )
        if not out.ok:
            how = "interrupted" if out.interrupted else "failed"
            self.op.step(name, "failed", detail=f"deploy {out.op_id} {how}: {_first(out.message)}")
            if out.interrupted:
                self.interrupted = f"block {index} ({arm})'s deploy was interrupted"
            else:
                self.failure = f"block {index} ({arm})'s deploy failed: {_first(out.message)}"
            return False
        self.deploys[arm].append(str(out.op_id))
        self.gated_since_deploy = False
        started = utc_now_iso(self.session.clock)
        try:
            m = measure(
                self.run_suite,
                plan.deployment(arm),
                suite=plan.suite,
                thresholds=plan.thresholds,
                levels=plan.levels,
                measured_s=plan.measured_s,
                warmup_s=plan.warmup_s,
                monotonic=self.session.clock.monotonic,
            )
        except KeyboardInterrupt:
            self.blocks.append(BlockResult(index, arm, profile, out.op_id, started, 0.0, {}, False))
            self.op.step(name, "failed", detail=f"deploy {out.op_id}; interrupted while measured")
            raise
        self.blocks.append(BlockResult(index, arm, profile, out.op_id, started, m.duration_s))
        self.measured.append(m)
        self.op.step(
            name,
            "done",
            detail=f"deploy {out.op_id}; {m.duration_s:.1f} s measured; "
            f"{plan.suite} {m.result.verdict.value}",
        )
        if arm == "B":
            self.b_results.append(m.result)
            journal_measured(self.op, self.plan, m, str(out.op_id))
            if len(self.b_results) == 1:
                self._run_gates()
        return True

    def _run_gates(self) -> None:
        """B's correctness suites, on the B just measured (a measured sweep is its own gate)."""
        for suite in self.plan.gates:
            if suite == "sweep" and self.plan.suite == "sweep":
                continue
            self.say(f"== gate on B: canary {suite}")
            self.gated_since_deploy = True
            b_op, clock = self.deploys["B"][-1], self.session.clock
            g = gate_on_b(self.op, self.run_suite, suite, self.plan, b_op, clock)
            self.gates.append(g)
            self.say(f"   gate {g.suite}: {'PASS' if g.passed else 'FAIL'}: {g.reason}")

    def _valued(self) -> list[BlockResult]:
        """The blocks so far with their values (choose_sources over every complete block)."""
        complete = [b for b in self.blocks if b.complete]
        valued = {
            b.index: replace(b, values=v)
            for b, v in zip(complete, choose_sources(self.measured), strict=True)
        }
        return [valued.get(b.index, b) for b in self.blocks]

    def _gates_now(self) -> list[GateResult]:
        """The gates run, and the measured suite's own gate over B's blocks so far."""
        measured = measured_gate(self.plan.suite, self.plan.gates, self.b_results)
        return [*self.gates, measured] if measured else list(self.gates)

    def _analyse(self, blocks: list[BlockResult], planned: int | None) -> Analysis:
        from dsv4ops.ab.analysis import analyse

        plan = self.plan
        return analyse(
            blocks,
            confidence=plan.confidence,
            band=plan.effect,
            looks=plan.looks,
            variation=plan.variation,
            planned=planned,
        )

    def _look(self, index: int) -> bool:
        """After a pair: True when the design has decided (journaled either way)."""
        from dsv4ops.ab.decision import decide, settled

        look = (index + 1) // 2
        gates = self._gates_now()
        analysis = self._analyse(self._valued(), None)
        done = settled(analysis, gates)
        head = decide(analysis, gates).reasons[0]
        what = (
            "decided, stopping"
            if done
            else (
                "budget spent"
                if index + 1 >= len(self.plan.schedule)
                else "not decided yet, going on"
            )
        )
        self.op.step(f"look {look} of {self.plan.looks}", "done", detail=f"{what}: {head}"[:400])
        self.say(f"== look {look}/{self.plan.looks} after {index + 1} blocks: {what}: {head}")
        return done

    def _end(self) -> ABOutcome:
        from dsv4ops.ab.decision import Decision, decide

        plan = self.plan
        self.blocks = self._valued()
        self.gates = self._gates_now()
        stopped = self.interrupted or self.failure
        analysis = self._analyse(self.blocks, len(plan.schedule) if stopped else None)
        decision = decide(analysis, self.gates)
        if stopped:  # whatever the blocks so far show: a script reads `stopped_early`
            decision = Decision(
                "A",
                "stopped_early",
                [f"the experiment stopped early ({stopped}), so the box stays on A"]
                + decision.reasons,
            )
        winner: Arm = decision.winner
        # The winner of an experiment that ran to its decision is deployed through its own
        # flag-aware gate (so it can be known-good); putting A back after a stop is a restore.
        box, left_on = self._leave_on(winner, gate=not stopped)
        report = self._report(analysis, decision, stopped)
        outcome = ABOutcome(
            self.op.op_id,
            plan,
            self.blocks,
            self.gates,
            analysis,
            decision,
            box,
            report,
            self.interrupted,
            self.failure,
        )
        done = ", ".join(f"{b.index} {b.arm} ({b.deploy_op})" for b in self.blocks if b.complete)
        if stopped or left_on is None:
            why = stopped or f"could not leave the box on {winner}"
            self.op.finish(
                Status.FAILED,
                message=f"{why} after {len(self.blocks)} of "
                f"{len(plan.schedule)} blocks (done: {done or 'none'}); the box runs "
                f"{box}; partial report {report[0].parent if report else '-'}",
            )
        else:
            self.op.finish(
                Status.SUCCEEDED,
                message=f"{decision.reasons[0]}; the box runs {box} "
                f"(blocks done: {done}); report {report[0].parent if report else '-'}",
            )
        return outcome

    def _leave_on(self, arm: Arm, *, gate: bool = False) -> tuple[str, str | None]:
        """Put the box on `arm` by the deploy path (with `gate`, the deploy's own flag-aware
        canary gate, judged as any deploy's: a FAIL rolls back, so does an INCONCLUSIVE unless the
        operator passed --accept-inconclusive-canary (then recorded as accepted)); without `gate`, not when it runs that arm's blocks' proven
        deployment already (and no gate ran on it since). (What runs, in words; the op or None.)"""
        plan, journal = self.plan, self.session.journal
        current = journal.deployed()
        hashes = {(journal.get(o).profile or {}).get("commands_hash") for o in self.deploys[arm]}
        profile = plan.profile(arm)
        if (
            not gate
            and current is not None
            and current.proven
            and not self.gated_since_deploy
            and (current.profile or {}).get("commands_hash") in hashes
        ):
            self.say(f"the box already runs {arm} ({profile}, {current.op})")
            self.op.step(f"leave the box on {arm}", "done", detail=f"already running {current.op}")
            return f"{arm} ({profile}, {current.op})", current.op
        self.op.step(f"leave the box on {arm}", "start")
        self.say(f"== leaving the box on {arm} ({profile})")
        try:
            out = run_deploy(
                self.session,
                plan.a if arm == "A" else plan.b,
                command=f"dsv4ops ab (experiment {self.op.op_id})",
                progress=self.say,
                canary=gate,
                within=self.op,
                accept_inconclusive=self.accept_inconclusive,
                canary_duration_s=final_gate_suite_s(plan.measured_s),
                reason=f"experiment {self.op.op_id}: leave the box on {arm}",
            )
        except DsOpsError as exc:  # refused before it changed anything (e.g. preflight)
            self.op.step(f"leave the box on {arm}", "failed", detail=_first(str(exc)))
            now = journal.deployed()
            return (f"{now.profile_name} ({now.op})" if now else "unknown"), None
        self.op.step(
            f"leave the box on {arm}",
            "done" if out.ok else "failed",
            detail=f"deploy {out.op_id}: {_first(out.message)}",
        )
        if not out.ok:
            return str(out.running or "unknown"), None
        return f"{arm} ({profile}, {out.op_id})", out.op_id

    def _report(self, analysis: Analysis, decision: Decision, stopped: str | None) -> list[Path]:
        from dsv4ops.ab.model import ARMS
        from dsv4ops.ab.report import write_report
        from dsv4ops.constants import state_dir

        plan = self.plan
        directory = Path(plan.report_dir) if plan.report_dir else state_dir() / "ab" / self.op.op_id
        try:
            return write_report(
                directory,
                a=plan.profile("A"),
                b=plan.profile("B"),
                schedule=plan.schedule,
                blocks=self.blocks,
                analysis=analysis,
                gates=self.gates,
                decision=decision,
                buckets={arm: list(plan.deployment(arm).decode_buckets) for arm in ARMS},
                experiment_op=self.op.op_id,
                interrupted=stopped,
            )
        except OSError as exc:
            self.say(f"warning: cannot write the report into {directory}: {exc}")
            return []


def _first(message: str) -> str:
    return (message.splitlines() or [""])[0][:300]
