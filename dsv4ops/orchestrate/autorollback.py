"""The automatic rollback after a failed (or interrupted) deploy: walk the known-good list.

Stop whatever is up (drain, router, decode, prefill), then start the newest known-good
deployment by the same path (start in order, wait ready, end-to-end probe). When that one fails
too, stop it and try the next known-good (fallbacks_for gives at most MAX_FALLBACKS, one per
distinct set of commands); when none is left, everything is stopped. A signal during the
rollback (the second Ctrl-C) stops the walk where it is: the journal says the state is unknown
and names the command that fixes it. Every ending is journaled before it is returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dsv4ops.deployment import START_ORDER, Deployment
from dsv4ops.journal.commands import command
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import UNKNOWN
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.engine import Interrupted, Runner, StepFailed, process_snapshot
from dsv4ops.orchestrate.interrupts import signal_name_of

KnownGood = tuple[Operation, Deployment]


def fix_unknown(target: str) -> str:
    """What makes an unknown state known again on `target`."""
    return (
        f"run {command('status', target)}, then {command('rollback', target)} to restore the "
        f"last known-good deployment, or {command('stop', target)} to stop whatever runs"
    )


@dataclass
class Ending:
    status: Status
    message: str
    running: str  # what runs now, in words
    interrupted: bool


def failure_line(kind: Kind, new: Deployment, failure: StepFailed) -> str:
    if isinstance(failure, Interrupted):
        how = "after" if failure.finished else "during"
        where = f"{how} '{failure.step}'" if failure.step else "before its first step"
        return f"{kind.value} of {new.describe()} was interrupted by {failure.signal_name} {where}"
    return f"{kind.value} of {new.describe()} failed at '{failure.step}': {failure.reason}"


def roll_back(
    runner: Runner,
    *,
    op_id: str,
    kind: Kind,
    new: Deployment,
    failure: StepFailed,
    candidates: Sequence[KnownGood],
    prepare: Callable[[Deployment], Deployment],
) -> Ending:
    """Handle `failure` of `new`: restore a known-good deployment or stop everything; journal it."""
    journal, progress = runner.journal, runner.settings.progress
    gate = runner.settings.interrupts
    interrupted = isinstance(failure, Interrupted)
    what = failure_line(kind, new, failure)
    did_line = (
        f"Done before the {'interrupt' if interrupted else 'failure'}: "
        + (", ".join(runner.log.done_titles()) or "nothing")
        + "."
    )

    def end(status: Status, message: str, running_id: str | None, running: str) -> Ending:
        with gate.shielded():  # a further signal must not cut the final record
            processes = (
                process_snapshot(runner.control, list(START_ORDER))
                if status is Status.ROLLED_BACK
                else None
            )
            journal.transition(
                op_id, status, message=message, running=running_id, processes=processes
            )
        return Ending(status, message, running, interrupted)

    if not runner.log.changed:
        return end(Status.FAILED, f"{what}\nNothing was changed on the target.", None, "unchanged")
    if any(t.action == P.START for t in runner.log.timings):
        runner.known = new  # some new components run now: drain through their ports
    tried: list[str] = []
    progress(what)
    for good_op, good in [*candidates, (None, None)]:
        try:
            progress("rolling back: stopping router, decode, prefill")
            try:
                runner.run(P.stop_steps(), None)
            except Interrupted:
                raise
            except StepFailed as stop_failure:
                msg = (
                    f"{what}\n{did_line}\nThe automatic rollback could not stop the processes "
                    f"({stop_failure}). Running now: unknown; {fix_unknown(journal.target)}."
                )
                return end(Status.FAILED, msg, UNKNOWN, "unknown")
            if good_op is None or good is None:
                break
            good = prepare(good)
            progress(f"rolling back to the known-good deployment {good.describe()} ({good_op.op})")
            runner.run(P.restore_steps(good), good)
        except (Interrupted, KeyboardInterrupt) as again:
            doing = f"restoring {good.describe()}" if good is not None else "stopping the processes"
            return _interrupted_again(end, what, did_line, again, doing, journal.target)
        except StepFailed as restore_failure:
            assert good_op is not None and good is not None
            tried.append(
                f"Rolling back to {good.describe()} ({good_op.op}) also failed at "
                f"'{restore_failure.step}': {restore_failure.reason}"
            )
            runner.known = good
            continue
        earlier = "".join(t + "\n" for t in tried)
        msg = (
            f"{what}\n{did_line}\n{earlier}Rolled back automatically to the known-good deployment "
            f"{good.describe()} (journal {good_op.op}) by the same safe path; its end-to-end "
            f"probe passed.\nRunning now: {good.describe()}."
        )
        return end(Status.ROLLED_BACK, msg, good_op.op, good.describe())
    redeploy = command("deploy", journal.target, new.profile_name)
    return end(
        Status.FAILED, f"{what}\n{did_line}\n" + _nothing_left(tried, redeploy), "", "nothing"
    )


def _nothing_left(tried: list[str], again: str) -> str:
    """Everything was stopped and the operation ended: no --recover is needed, only a deploy
    once the cause is fixed (`again`: the command that deploys the profile that failed)."""
    if not tried:
        return (
            "No known-good deployment to roll back to, so everything was stopped. "
            f"Running now: nothing. To recover: fix the cause, then run {again}."
        )
    return "".join(t + "\n" for t in tried) + (
        f"No other known-good deployment left to try ({len(tried)} tried), so everything "
        f"was stopped. Running now: nothing (everything was stopped). To recover: fix the "
        f"cause, then run {again}."
    )


def _interrupted_again(
    end: Callable[[Status, str, str | None, str], Ending],
    what: str,
    did_line: str,
    again: BaseException,
    doing: str,
    target: str,
) -> Ending:
    at = f", at '{again.step}'" if isinstance(again, StepFailed) and again.step else ""
    msg = (
        f"{what}\n{did_line}\nThe automatic rollback was interrupted too "
        f"({signal_name_of(again)} while {doing}{at}), so it stopped there.\nRunning now: unknown "
        f"(some components may be up); {fix_unknown(target)}."
    )
    return end(Status.FAILED, msg, UNKNOWN, "unknown")


def known_good_candidates(fallback: KnownGood | Sequence[KnownGood] | None) -> list[KnownGood]:
    """One known-good (Operation, Deployment) pair, or a list of them, as a list."""
    if fallback is None:
        return []
    if isinstance(fallback, tuple) and len(fallback) == 2 and isinstance(fallback[0], Operation):
        return [fallback]
    return list(fallback)
