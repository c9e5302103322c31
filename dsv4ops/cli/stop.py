"""`dsv4ops stop`: drain and stop router, decode, prefill; nothing of ours left, ports closed."""

from __future__ import annotations

import click

from dsv4ops.cli._output import echo_json, json_option, target_option


@click.command()
@target_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.option(
    "--recover", is_flag=True, help="Resolve an interrupted operation (stale lock) first."
)
@click.option("--reason", default=None, help="Why (recorded in the journal).")
def stop(target: str | None, yes: bool, as_json: bool, recover: bool, reason: str | None) -> None:
    """Stop the whole deployment in the safe order (journaled)."""
    from dsv4ops.cli import _context as C

    ctx = C.open_target(target)
    try:
        if not yes:
            click.confirm(f"stop everything on {ctx.target.name}?", abort=True)
        op = C.operator_for(
            ctx,
            progress=C.progress_printer(as_json),
            canary=None,
            model="default",
            command="dsv4ops stop",
        )
        out = op.stop(reason=reason, recover=recover)
    finally:
        ctx.close()
    if as_json:
        echo_json(out.to_json())
    else:
        click.echo(f"stop {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}")
    C.raise_for(out)
