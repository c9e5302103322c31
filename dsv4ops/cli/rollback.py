"""`dsv4ops rollback`: redeploy the last known-good (or a named) deployment, exactly as recorded."""

from __future__ import annotations

import click

from dsv4ops.cli._output import echo_json, json_option, target_option


@click.command()
@target_option
@click.option(
    "--to", "to", default=None, metavar="ID|REV", help="Journal id (prefix) or git commit."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.option(
    "--recover", is_flag=True, help="Resolve an interrupted operation (stale lock) first."
)
@click.option(
    "--canary", is_flag=True, help="Also run the canary (the end-to-end probe always runs)."
)
@click.option("--reason", default=None, help="Why (recorded in the journal).")
def rollback(
    target: str | None,
    to: str | None,
    yes: bool,
    as_json: bool,
    recover: bool,
    canary: bool,
    reason: str | None,
) -> None:
    """Roll back to the last known-good deployment through the same safe path."""
    run_rollback(
        target=target,
        to=to,
        yes=yes,
        as_json=as_json,
        recover=recover,
        canary=canary,
        reason=reason,
    )


def run_rollback(
    *,
    target: str | None,
    to: str | None,
    yes: bool,
    as_json: bool,
    recover: bool,
    canary: bool,
    reason: str | None,
) -> None:
    from dsv4ops.cli import _context as C
    from dsv4ops.journal.records import Kind
    from dsv4ops.orchestrate.restore import fallbacks_for, rebuild, rollback_target

    progress = C.progress_printer(as_json)
    ctx = C.open_target(target)
    try:
        op = rollback_target(ctx.journal, to)
        dep, how = rebuild(op, C.render_at_commit(ctx.target))
        if not yes:
            click.confirm(f"roll back {ctx.target.name} to {dep.describe()} ({op.op})?", abort=True)
        progress(f"rollback target: {op.op} ({dep.describe()}), rebuilt from {how}")
        # If the target fails too, the next known-good ones are tried, whether or not anything
        # ran before: with nothing running, stopping everything is the worst outcome, not the plan.
        fallback = fallbacks_for(
            ctx.journal, C.render_at_commit(ctx.target), exclude_op=op.op, progress=progress
        )
        step = C.canary_step(None, duration_s=20.0, progress=progress) if canary else None
        runner = C.operator_for(
            ctx, progress=progress, canary=step, model=dep.model_name, command="dsv4ops rollback"
        )
        out = runner.deploy(
            dep,
            kind=Kind.ROLLBACK,
            reason=reason or f"rollback to {op.op}",
            fallback=fallback,
            run_canary=canary,
            recover=recover,
        )
    finally:
        ctx.close()
    if as_json:
        echo_json(out.to_json())
    else:
        click.echo(f"{out.kind} {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}")
    C.raise_for(out)
