"""The step runner: executes plan steps against a target, journaling and timing each one.

One handler per step action (registered in one dict). A failing step raises StepFailed, which
carries what failed; `ops.py` decides what to do about it (roll back, report). The runner also
keeps the list of what it did, so an error can say what was done.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.deployment import WORKERS, Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.gates import GateResult, GateSource, GateVerdict, canary_detail, canary_gate
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.diagnose import missing_module_hint
from dsv4ops.orchestrate.drain import DrainWatch, no_progress_bound_s
from dsv4ops.orchestrate.interrupts import InterruptGate, signal_name_of
from dsv4ops.orchestrate.kernelpkg import KernelSupport
from dsv4ops.orchestrate.liveness import exited_meanwhile
from dsv4ops.orchestrate.model import process_spec
from dsv4ops.orchestrate.probe import ProbeThinking, run_probe
from dsv4ops.orchestrate.steplog import ProcessRecord, RunLog, StepTiming
from dsv4ops.orchestrate.timeouts import Timeouts
from dsv4ops.orchestrate.unrecorded import JournalLost
from dsv4ops.remote.errors import ComponentNotReadyError
from dsv4ops.timings import AFTER_DRAIN_GRACE_S, TARGET_HTTP_S
from dsv4ops.waits import QUIET, UNWATCHED, Wait, WaitObserver

Progress = Callable[[str], None]
# (deployment, router base URL) -> (the gate's verdict, reasons)
CanaryStep = Callable[[Deployment, str], tuple[GateVerdict, list[str]]]
# A readiness wait asks the target in slices of this many seconds, so the wait's observer hears
# what the component answered meanwhile ("HTTP 503: loading weights"); the target still polls
# every 50 ms inside a slice, so readiness is seen as soon as before.
WAIT_SLICE_S = 3.0


@dataclass
class RunSettings:
    """What an operation's steps run with. The Operator holds one and hands it to every Runner it
    makes, so the two never disagree about timeouts, the canary or the kernel support."""

    clock: Clock = field(default_factory=SystemClock)
    progress: Progress = field(default=lambda _line: None)
    timeouts: Timeouts = field(default_factory=Timeouts)
    canary: CanaryStep | None = None
    model: str = "default"
    accept_inconclusive: bool = False  # an INCONCLUSIVE canary counts as passed (deploy flag)
    kernels: KernelSupport | None = None
    interrupts: InterruptGate = field(default_factory=InterruptGate)
    waits: WaitObserver = QUIET  # shows a long step while it runs (dsv4ops/waits.py)


class StepFailed(Exception):
    """A step failed; `step` is its title, `reason` the one-paragraph why (may hold a log tail)."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


class Interrupted(StepFailed):
    """SIGINT/SIGTERM during a step: handled like a failed step (interrupts.py). `finished` is
    True when the step in flight was one that must not be cut and was finished first."""

    def __init__(self, step: str, signal_name: str, *, finished: bool = False) -> None:
        how = "after it finished (it was not cut in half)" if finished else "while it ran"
        super().__init__(step, f"interrupted by {signal_name} {how}")
        self.signal_name = signal_name
        self.finished = finished


class Runner:
    """Runs steps for one operation; every step is journaled before it runs."""

    def __init__(
        self,
        control: TargetControl,
        journal: Journal,
        op_id: str,
        settings: RunSettings | None = None,
        source: GateSource = GateSource.DEPLOY,
    ) -> None:
        self.control, self.journal, self.op_id = control, journal, op_id
        self.settings, self.source, self.log = settings or RunSettings(), source, RunLog()
        self._gate: GateResult | None = None  # the canary's (journal/gates.py), for its step
        self._handlers: dict[str, Callable[[P.Step, Deployment | None], str]] = {
            P.STOP: self._stop,
            P.DRAIN: self._drain,
            P.START: self._start,
            P.WAIT: self._wait,
            P.KERNELS: self._kernels,
            P.PROBE: self._probe,
            P.CANARY: self._canary,
        }
        # Components this runner knows about, for the drain (the workers' metrics ports).
        self.known: Deployment | None = None
        # The last router drain: None (none ran), "not running", "draining", "exited", "outlived".
        self._router_drain: str | None = None
        # When the last start step returned (its component's ready wait is measured from it).
        self._started_at: float | None = None
        self._started: dict[str, int | None] = {}  # started by this runner and not stopped since
        # The stop grace of each component it started, from the deployment it started it from.
        self._graces: dict[str, float] = {}
        self._seen: Wait = UNWATCHED  # the observer's handle of the step in flight

    def run(self, steps: list[P.Step], deployment: Deployment | None) -> None:
        try:
            for step in steps:
                try:
                    self.run_step(step, deployment)
                except KeyboardInterrupt as exc:  # between two steps: after the last one finished
                    last = self.log.timings[-1].title if self.log.timings else ""
                    raise Interrupted(last, signal_name_of(exc), finished=True) from None
        finally:
            # The last step's done record, when deferred. A failure to write it is not lost: it
            # stays deferred and the operation's next record (its outcome) writes it or fails.
            with contextlib.suppress(DsOpsError), self.settings.interrupts.holding():
                self.journal.flush()

    def run_step(self, step: P.Step, deployment: Deployment | None) -> None:
        handler = self._handlers[step.action]
        gate = self.settings.interrupts
        # Starting or stopping a process is finished even when a signal arrives meanwhile: cut
        # in half it would leave a process nobody recorded, or one half-stopped.
        hold = gate.holding() if step.action in P.MUTATING else contextlib.nullcontext()
        t0 = self.settings.clock.monotonic()
        try:
            with hold:
                # Also carries the last step's deferred done record, so no signal cuts it; a
                # step that may be cut is interrupted right after it.
                with gate.holding():
                    self._record(step, "start", ran=False)
                if step.action not in P.MUTATING:
                    gate.raise_held()
                with self.settings.waits.waiting(step.title, self._bound_s(step)) as wait:
                    self._seen = wait
                    detail = handler(step, deployment)
        except (DsOpsError, StepFailed, KeyboardInterrupt) as exc:
            took = self.settings.clock.monotonic() - t0
            if isinstance(exc, KeyboardInterrupt):
                exc = Interrupted(step.title, signal_name_of(exc))
            reason = exc.reason if isinstance(exc, StepFailed) else str(exc)
            held = gate.take_held()
            if held:  # the step failed on its own; the signal is not also a second interrupt
                reason += f" ({held} arrived meanwhile)"
            with gate.holding():
                self._record(step, "failed", ran=True, failure=reason, took=took)
            self.log.timings.append(
                StepTiming(step.title, step.action, step.component, took, False, reason)
            )
            self.settings.progress(f"  FAILED {step.title} ({took:.2f}s)")
            if isinstance(exc, Interrupted):
                raise exc from None
            raise StepFailed(step.title, reason) from exc
        took = self.settings.clock.monotonic() - t0
        with gate.holding():
            defer = step.action in P.OBSERVING  # rides the next start record (Journal.step)
            self._record(step, "done", ran=True, took=took, detail=detail, defer=defer)
        self.log.timings.append(
            StepTiming(step.title, step.action, step.component, took, True, detail)
        )
        self.settings.progress(
            f"  ok     {step.title} ({took:.2f}s){' - ' + detail if detail else ''}"
        )
        held = gate.take_held()
        if held:
            raise Interrupted(step.title, held, finished=True)

    def _record(
        self,
        step: P.Step,
        phase: str,
        *,
        ran: bool,
        failure: str | None = None,
        took: float | None = None,
        detail: str = "",
        defer: bool = False,
    ) -> None:
        """Journal `phase` of `step`; a record that cannot be written stops the operation."""
        gate, self._gate = (None, self._gate) if phase == "start" else (self._gate, None)
        try:
            self.journal.step(
                self.op_id,
                step.title,
                phase,
                duration_s=took,
                detail=(failure or detail)[:2000],
                defer=defer,
                gate=gate and replace(gate, duration_s=took),
            )
        except DsOpsError as exc:
            raise JournalLost(step.title, str(exc), ran=ran, failure=failure) from exc

    def _bound_s(self, step: P.Step) -> float | None:
        """The seconds a step is bounded by, for the live line (None: no bound of its own)."""
        t = self.settings.timeouts
        if step.action == P.WAIT and step.component:
            return t.ready_for(step.component)
        if step.action == P.STOP and step.component:
            return self.grace_s(step.component)
        return t.drain_s if step.action == P.DRAIN else None

    def grace_s(self, name: str) -> float:
        """The grace a stop of `name` gets (Timeouts.grace_for): as deployed, never as asked."""
        t = self.settings.timeouts
        return t.grace_for(name, started=self._graces, running=self.known)

    # -- handlers (each returns a short detail line) ----------------------------------------

    def _stop(self, step: P.Step, _d: Deployment | None) -> str:
        assert step.component
        self.log.changed = True
        drained = step.component == "router" and self._router_drain is not None
        # After a drain the router had its drain since its SIGTERM (the bound, or less when the
        # streams it holds cannot finish: a wedge, a dead decode): a short grace, then SIGKILL
        # (the stop still verifies no process/port).
        grace = AFTER_DRAIN_GRACE_S if drained else self.grace_s(step.component)
        report = self.control.stop(step.component, grace_s=grace)
        self._started.pop(step.component, None)
        self._graces.pop(step.component, None)
        if not report.was_running:
            if drained and self._router_drain == "exited":
                return "exited during the drain"
            return "was not running"
        if report.forced:
            return "SIGKILL needed after the " + ("drain" if drained else "grace period")
        return ""

    def _drain(self, step: P.Step, _d: Deployment | None) -> str:
        """SIGTERM the router and wait (bounded) until it has exited and the workers are idle.

        sglang-router 0.3.2 drains on SIGTERM: it stops accepting new connections at once, lets
        the streams in flight finish, then exits (its own --shutdown-grace-period-secs defaults
        to 180 s, above our bound, so our bound is the one that applies). The workers' metrics
        are watched meanwhile, for the progress lines and for requests that did not come through
        the router. A worker whose /metrics cannot be read is reported as UNKNOWN, never as idle;
        it does not hold the drain up (the router's exit already says its streams are done).
        """
        workers = self.known.in_order(WORKERS) if self.known else []
        t0 = self.settings.clock.monotonic()
        with_router = step.component == "router"
        router_up = False
        if with_router:
            router_up = bool(self.control.kill("router", signal="TERM", group=True))
            self._router_drain = "draining" if router_up else "not running"
            if router_up:
                self.log.changed = True  # the SIGTERM is the first change on the target
        decode = next((c for c in workers if c.name == "decode"), None)
        stall_s = (
            no_progress_bound_s(decode, self.known.decode_log_interval)
            if decode is not None and self.known is not None
            else None
        )
        watch = DrainWatch(
            self.control,
            workers,
            clock=self.settings.clock,
            progress=self.settings.progress,
            with_router=with_router,
            router_up=router_up,
            t0=t0,
            stall_s=stall_s,
        )
        bound_s = self.settings.timeouts.drain_s
        busy = watch.wait(bound_s)
        if watch.stalled:
            if with_router and watch.router_up:
                self._router_drain = "outlived"
            return "; ".join(watch.stalled.values())
        if busy is not None:
            if with_router and watch.router_up:
                self._router_drain = "outlived"
            return watch.gave_up(busy, bound_s)
        took = self.settings.clock.monotonic() - t0
        router_part = None
        if with_router and self._router_drain == "draining":
            self._router_drain = "exited"
            router_part = f"router drained and exited {took:.2f}s after SIGTERM"
        elif with_router:
            router_part = "router was not running"
        return watch.drained(router_part)

    def _start(self, step: P.Step, d: Deployment | None) -> str:
        assert d and step.component
        self.log.changed = True
        state = self.control.start(process_spec(d.component(step.component)))
        self._started_at = self.settings.clock.monotonic()
        self._started[step.component] = state.pid
        self._graces[step.component] = d.component(step.component).stop_grace_s
        return f"pid {state.pid}"

    def _wait(self, step: P.Step, d: Deployment | None) -> str:
        assert step.component
        limit = self.settings.timeouts.ready_for(step.component)
        t0 = self.settings.clock.monotonic()
        for url in step.checks:
            try:
                self._wait_ready(step, url, t0, limit)
            except DsOpsError as exc:
                python = d.component(step.component).argv[0] if d else "python"
                hint = missing_module_hint(str(exc), python)
                if hint is None:
                    raise
                raise StepFailed(step.title, f"{step.component}: {hint}.\n{exc}") from exc
        started = t0 if self._started_at is None else self._started_at
        self.log.ready_wait_s[step.component] = self.settings.clock.monotonic() - started
        return ""

    def _wait_ready(self, step: P.Step, url: str, t0: float, limit: float) -> None:
        """Wait for `url` in slices, telling the observer what the component last answered."""
        assert step.component
        path = "/" + url.split("/", 3)[-1] if url.count("/") >= 3 else url
        while True:
            left = max(1.0, limit - (self.settings.clock.monotonic() - t0))
            try:
                self.control.wait_http(
                    url, timeout_s=min(left, WAIT_SLICE_S), proc_name=step.component
                )
                return
            except ComponentNotReadyError as exc:
                if exc.reason != "timeout":
                    raise
                gone = exited_meanwhile(self.control, self._started, step.component)
                if gone:
                    raise StepFailed(step.title, gone) from exc
                if left > WAIT_SLICE_S:
                    self._seen.observe(f"{step.component} {path} {exc.last}")
                    continue
                waited = self.settings.clock.monotonic() - t0
                tail = f"\n--- last log lines ---\n{exc.log_tail}" if exc.log_tail else ""
                raise StepFailed(
                    step.title,
                    f"{step.component} not ready: {url} not ready after "
                    f"{waited:.0f}s of {limit:g}s (last: {exc.last}){tail}",
                ) from exc

    def _kernels(self, step: P.Step, d: Deployment | None) -> str:
        assert d and d.kernel_package and step.component
        if self.settings.kernels is None:
            return "skipped (no kernel package support wired in)"
        info = self.control.http(step.checks[0], timeout_s=TARGET_HTTP_S)
        if info.status != 200:
            raise StepFailed(
                step.title, f"{step.component} /server_info answered {info.status or info.error}"
            )
        log = self.control.log_tail(step.component, lines=2000)  # the evidence is at its start
        used, reason = self.settings.kernels.loaded(
            info.body, log, d.kernel_package, d.component(step.component)
        )
        if not used:
            raise StepFailed(
                step.title, f"kernel package {d.kernel_package} is not in use: {reason}"
            )
        return reason

    def _probe(self, _step: P.Step, d: Deployment | None) -> str:
        assert d
        result = run_probe(
            self.control,
            d.component("router").url(),
            model=self.settings.model,
            rounds=self.settings.timeouts.probe_rounds,
            timeout_s=self.settings.timeouts.probe_request_s,
            # asked the way the profile's canary (and its users) ask: reasoning on or off
            thinking=ProbeThinking.from_canary(d.canary, d.router_kind),
            tool_call=d.probe.tool_call,  # what the profile declares its model can do
            router_key=d.router_key,  # the router's API key, when it needs one
        )
        self.log.probe_checks = result.checks
        if not result.ok:
            raise StepFailed("end-to-end probe", "; ".join(result.failures))
        return result.summary()

    def _canary(self, step: P.Step, d: Deployment | None) -> str:
        assert d
        if self.settings.canary is None:
            return "skipped (no canary available)"
        verdict, why = self.settings.canary(d, d.component("router").url())
        accept = self.settings.accept_inconclusive  # what judged it, as data: journal/gates.py
        self._gate = g = canary_gate(verdict, why, accept, self.source, self.op_id, d.commands_hash)
        if not g.passed:
            raise StepFailed(
                step.title, f"verdict {g.verdict.value}: {'; '.join(why) or 'no reasons'}"
            )
        return canary_detail(g)


def process_snapshot(control: TargetControl, names: list[str]) -> dict[str, ProcessRecord]:
    """pid and start time per component, recorded at success for drift detection."""
    states = control.status(names)
    return {n: {"pid": s.pid, "started_at": s.started_at} for n, s in states.items() if s.alive}
