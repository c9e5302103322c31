"""`dsv4ops deploy PROFILE`: the PD pair and router as one unit, in the safe order."""

from __future__ import annotations

import click

from dsv4ops.cli._output import echo_json, json_option, target_option
from dsv4ops.orchestrate.pd import WARNING as PD_WARNING


@click.command()
@click.argument("profile")
@target_option
@click.option(
    "--dry-run", is_flag=True, help="Print the plan and the exact commands; change nothing."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
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
@click.option("--recover", is_flag=True, help="Resolve a deploy that was interrupted (stale lock).")
@click.option(
    "--no-canary", is_flag=True, help="Skip the canary (the end-to-end probe always runs)."
)
@click.option(
    "--canary-duration",
    type=float,
    default=20.0,
    show_default=True,
    help="Seconds per flag-aware canary suite.",
)
@click.option(
    "--accept-inconclusive-canary",
    "accept_inconclusive",
    is_flag=True,
    help="Keep the deployment when the canary cannot judge (INCONCLUSIVE); FAIL still rolls back.",
)
@click.option("--reason", default=None, help="Why (recorded in the journal).")
def deploy(
    profile: str,
    target: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    only: tuple[str, ...],
    allow_partial_pair: bool,
    recover: bool,
    no_canary: bool,
    canary_duration: float,
    accept_inconclusive: bool,
    reason: str | None,
) -> None:
    """Deploy PROFILE to a target: drain, stop, start in order, prove end to end, mark known-good."""
    run_deploy(
        profile=profile,
        target=target,
        dry_run=dry_run,
        yes=yes,
        as_json=as_json,
        only=only,
        allow_partial_pair=allow_partial_pair,
        recover=recover,
        canary=not no_canary,
        canary_duration=canary_duration,
        accept_inconclusive=accept_inconclusive,
        reason=reason,
    )


def run_deploy(
    *,
    profile: str,
    target: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    only: tuple[str, ...],
    allow_partial_pair: bool,
    recover: bool,
    canary: bool,
    canary_duration: float,
    accept_inconclusive: bool,
    reason: str | None,
) -> None:
    from dsv4ops.cli import _context as C
    from dsv4ops.orchestrate import plan as P
    from dsv4ops.orchestrate.pd import restart_scope
    from dsv4ops.orchestrate.restore import fallbacks_for
    from dsv4ops.profiles import get_target

    tgt = get_target(target)
    new = C.deployment_for(profile, tgt)
    scope = restart_scope(only, allow_partial_pair=allow_partial_pair)
    if dry_run:
        steps = P.deploy_plan(new, scope.components, canary=canary)
        if as_json:
            echo_json(
                {
                    "dry_run": True,
                    "target": tgt.name,
                    "profile": new.profile_name,
                    "commit": new.git_commit,
                    "commands_hash": new.commands_hash,
                    "note": scope.note,
                    "plan": P.plan_json(steps),
                }
            )
            return
        click.echo(f"plan: deploy {new.describe()} to {tgt.name} (dry run: nothing is changed)")
        if scope.note:
            click.echo(f"note: {scope.note}")
        for line in P.render_plan(steps):
            click.echo(line)
        return
    if not yes:
        click.confirm(f"deploy {new.describe()} to {tgt.name}?", abort=True)
    progress = C.progress_printer(as_json)
    ctx = C.open_target(target)
    try:
        prev = ctx.journal.deployed()
        step = (
            C.canary_step(
                (prev.profile or {}).get("flags") if prev else None,
                duration_s=canary_duration,
                progress=progress,
            )
            if canary
            else None
        )
        op = C.operator_for(
            ctx,
            progress=progress,
            canary=step,
            model=new.model_name,
            command=f"dsv4ops deploy {profile}",
            accept_inconclusive=accept_inconclusive,
        )
        fallback = fallbacks_for(ctx.journal, C.render_at_commit(tgt), progress=progress)
        out = op.deploy(
            new, scope=scope, reason=reason, fallback=fallback, run_canary=canary, recover=recover
        )
    finally:
        ctx.close()
    if as_json:
        echo_json(out.to_json())
    else:
        click.echo(f"{out.kind} {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}")
        # Repeated after the result so it is the last thing the operator reads.
        for n in out.notes:
            if n.startswith(PD_WARNING):
                click.echo(n)
    C.raise_for(out)
