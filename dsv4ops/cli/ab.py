"""`dsv4ops ab PROFILE_A PROFILE_B`: a time-multiplexed A/B on one target (usecases/ab.py).

Exit codes (dsv4ops/exitcodes.py): 0 the experiment ran to its end (whichever arm won), 2 a
block's deploy or suite failed (the box was put back on A), 130 interrupted (the box was put back
on A). A CLI that died mid-experiment leaves it in flight: `dsv4ops rollback --recover` marks it
ABANDONED and puts the box back on A (there is no `ab --recover`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import (
    NAMED,
    accept_inconclusive_option,
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    target_option,
    yes_option,
)
from dsv4ops.cli._params import FiniteFloatRange
from dsv4ops.constants import (
    AB_MAX_BLOCK_S,
    AB_MAX_BLOCKS,
    AB_MAX_LEVELS,
    AB_MAX_WARMUP_S,
    MAX_CONCURRENCY,
)

if TYPE_CHECKING:
    from dsv4ops.usecases.ab_outcome import ABOutcome


@click.command("ab")
@click.argument("profile_a")
@click.argument("profile_b")
@target_option
@click.option(
    "--suite",
    type=click.Choice(["sweep", "soak"]),
    default="sweep",
    show_default=True,
    help="The canary workload measured in every block.",
)
@click.option(
    "--blocks",
    type=click.IntRange(min=2, max=AB_MAX_BLOCKS),
    default=None,
    help="The budget: the most blocks, in the ABBA BAAB order (even; default: sized by "
    "the design for --effect at --variation). The experiment stops when decided.",
)
@click.option(
    "--effect",
    type=FiniteFloatRange(0, 100, min_open=True, max_open=True),
    default=5.0,
    show_default=True,
    help="The smallest tok/s effect worth a switch, in percent: the budget is sized to "
    "decide it, and B is equivalent when shown within ± this much.",
)
@click.option(
    "--variation",
    type=FiniteFloatRange(0, 50, max_open=True),
    default=2.0,
    show_default=True,
    help="The box's deploy-to-deploy sd per block, in percent (never understate it: the "
    "error rates hold up to this much; docs/ab.md).",
)
@click.option(
    "--levels",
    type=NAMED,  # `--levels "$L"` with L unset: refused, never A's levels
    default=None,
    help=f"Concurrency levels, e.g. 48,56,57,64 (default: A's sweep levels; at most "
    f"{AB_MAX_LEVELS}, each 1 to {MAX_CONCURRENCY}).",
)
@click.option(
    "--block-duration",
    type=FiniteFloatRange(min=0.5, max=AB_MAX_BLOCK_S),
    default=None,
    help="Seconds measured per block (default: the suite's own length).",
)
@click.option(
    "--warmup",
    type=FiniteFloatRange(min=0, max=AB_MAX_WARMUP_S),
    default=10.0,
    show_default=True,
    help="Seconds of load after each deploy before the measured part (discarded).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=8),
    default=None,
    help="max_tokens of the measured requests (default: the profile's canary setting).",
)
@click.option(
    "--confidence",
    type=FiniteFloatRange(0.5, 0.999),
    default=0.95,
    show_default=True,
    help="Confidence over all looks: a wrong verdict has probability at most 1 - C.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Report directory (default: the state directory's ab/EXPERIMENT_ID).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the schedule, the gates and the time; change nothing."
)
@accept_inconclusive_option
@yes_option
@reason_option
@json_option
def ab(
    profile_a: str,
    profile_b: str,
    target: str | None,
    suite: str,
    blocks: int | None,
    effect: float,
    variation: float,
    levels: str | None,
    block_duration: float | None,
    warmup: float,
    max_tokens: int | None,
    confidence: float,
    report_dir: str | None,
    dry_run: bool,
    accept_inconclusive: bool,
    yes: bool,
    reason: str | None,
    as_json: bool,
) -> None:
    """A/B PROFILE_A against PROFILE_B on one target, blocks alternating in time; leave the box
    on the winner (on A when inconclusive, partial or unsafe).

    An experiment's block deploys are never known-good, and a gate B fails keeps B's commands
    from ever being offered by `rollback`; the final deploy of the winner runs its own gate. If this CLI dies mid-experiment, run
    `dsv4ops rollback --recover`: it marks the experiment ABANDONED and puts the box back on A
    (there is no `ab --recover`)."""
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases import ab as AB
    from dsv4ops.usecases.ab_plan import plan_ab

    # The plan reads the switch costs from the target's journal: a dry run, like `status`,
    # from the local cache when the target cannot be reached.
    session = open_target(target, verb="ab", read_only=dry_run)
    try:
        plan = plan_ab(
            session,
            profile_a,
            profile_b,
            suite=suite,
            blocks=blocks,
            effect=effect / 100,
            variation=variation / 100,
            levels=_levels(levels),
            block_s=block_duration,
            warmup_s=warmup,
            confidence=confidence,
            report_dir=report_dir,
            workload=_workload(suite, max_tokens),
        )
        if dry_run:
            echo_json(plan.to_json()) if as_json else echo_lines(
                [*plan.lines(), "(dry run: nothing is changed)"]
            )
            return
        if not yes:
            click.confirm(
                f"run up to {len(plan.schedule)} A/B blocks of {profile_a} vs {profile_b} on "
                f"{plan.target_name} (at most about {plan.total_s / 60:.0f} min)?",
                abort=True,
            )
        out = AB.run_ab(
            session,
            plan,
            progress=progress_printer(as_json),
            command=f"dsv4ops ab {profile_a} {profile_b}",
            reason=reason,
            accept_inconclusive=accept_inconclusive,
        )
    finally:
        session.close()
    _report_outcome(out, as_json)


def _report_outcome(out: ABOutcome, as_json: bool) -> None:
    """How the experiment ended, as JSON or the decision's reasons; an interrupted or failed
    experiment raises (its exit code) naming what the box runs."""
    from dsv4ops.usecases.ab import raise_for

    if as_json:
        error = out.interrupted or out.failure
        echo_json({**out.to_json(), "exit": out.exit_code, "error": error})
    else:
        # The reasons quote measurements and what the servers answered: terminal-safe.
        lines = [*out.decision.reasons]
        lines.append(
            f"experiment {out.op_id}: winner {out.decision.winner}; the box runs {out.box}"
        )
        if out.report:
            lines.append(f"report: {out.report[0].parent}/report.md")
        echo_lines(lines)
    raise_for(out)


def _levels(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        levels = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected integers separated by commas", param_hint="--levels"
        ) from None
    # A level is a canary's concurrency (MAX_CONCURRENCY: the profile's own bound); each one
    # takes a share of the alpha and of the block's time (AB_MAX_LEVELS).
    wrong = [c for c in levels if not 1 <= c <= MAX_CONCURRENCY]
    if wrong:
        raise click.BadParameter(
            f"{wrong[0]} is not a concurrency level from 1 to {MAX_CONCURRENCY}",
            param_hint="--levels",
        )
    if len(levels) > AB_MAX_LEVELS:
        raise click.BadParameter(
            f"{len(levels)} levels: at most {AB_MAX_LEVELS}", param_hint="--levels"
        )
    return levels


def _workload(suite: str, max_tokens: int | None) -> dict[str, int]:
    if max_tokens is None:
        return {}
    return {"sweep_max_tokens" if suite == "sweep" else "max_tokens": max_tokens}
