"""`dsv4ops deploy PROFILE`: the PD pair and router as one unit, in the safe order."""

from __future__ import annotations

import click

from dsv4ops.cli._output import (
    accept_inconclusive_option,
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    target_option,
    yes_option,
)
from dsv4ops.cli._params import FiniteFloatRange


@click.command()
@click.argument("profile")
@target_option
@click.option(
    "--dry-run", is_flag=True, help="Print the plan and the exact commands; change nothing."
)
@yes_option
@json_option
@click.option(
    "--only",
    multiple=True,
    type=click.Choice(["prefill", "decode", "router"]),
    help="Restart only these components (a lone prefill or decode becomes a pair restart).",
)
@click.option(
    "--i-know-decode-only-restart-breaks-kv-transfer",
    "allow_partial_pair",
    is_flag=True,
    help="DANGEROUS: really restart one PD worker alone (see the bootstrap incident).",
)
@click.option(
    "--restart",
    is_flag=True,
    help="Restart what runs: refused unless PROFILE renders the very commands the deployed unit "
    "runs (a restart changes nothing else).",
)
@click.option("--recover", is_flag=True, help="Resolve a deploy that was interrupted (stale lock).")
@click.option(
    "--no-canary", is_flag=True, help="Skip the canary (the end-to-end probe always runs)."
)
@click.option(
    "--canary-duration",
    type=FiniteFloatRange(min=1.0),
    default=None,
    help="Seconds per flag-aware canary suite (default: the profile's canary.gate_duration_s, 20).",
)
@accept_inconclusive_option
@reason_option
def deploy(
    profile: str,
    target: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    only: tuple[str, ...],
    allow_partial_pair: bool,
    restart: bool,
    recover: bool,
    no_canary: bool,
    canary_duration: float | None,
    accept_inconclusive: bool,
    reason: str | None,
) -> None:
    """Deploy PROFILE to a target: drain, stop, start in order, prove end to end, mark known-good."""
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases import deploy as D

    plan = D.plan_deploy(
        profile, target, only=only, allow_partial_pair=allow_partial_pair, canary=not no_canary
    )
    # --restart reads what runs first: refused before the plan is shown or anything asked, on
    # the session the deploy then uses (a dry run's: read-only, closed after the plan)
    session = open_target(target, verb="deploy", read_only=dry_run) if restart else None
    try:
        if session is not None:
            D.check_restart(session, plan)
        if dry_run:
            echo_json(plan.to_json()) if as_json else echo_lines(plan.lines())
            return
        # the profile's known hazards, before the question and the first change
        echo_lines((f"warning: {w}" for w in plan.warnings()), err=True)
        if not yes:
            click.confirm(f"deploy {plan.deployment.describe()} to {plan.target.name}?", abort=True)
        session = session or open_target(target, verb="deploy")
        out = D.run_deploy(
            session,
            plan,
            command=f"dsv4ops deploy {profile}",
            canary=not no_canary,
            canary_duration_s=canary_duration,
            accept_inconclusive=accept_inconclusive,
            recover=recover,
            reason=reason,
            progress=progress_printer(as_json),
        )
    finally:
        if session is not None:
            session.close()
    if as_json:
        echo_json(out.to_json())
    else:
        # The message may quote what a server or a remote command said: printed terminal-safe.
        first = f"{out.kind} {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}"
        # Repeated after the result so it is the last thing the operator reads.
        echo_lines([first, *(n for n in out.notes if n.startswith(D.PD_WARNING))])
    D.raise_for(out)
