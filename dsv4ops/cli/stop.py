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
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.orchestrate.outcome import raise_for
    from dsv4ops.orchestrate.usecases.stop import run_stop

    session = open_target(target, verb="stop")
    try:
        if not yes:
            click.confirm(f"stop everything on {session.target.name}?", abort=True)
        out = run_stop(
            session, progress=progress_printer(as_json), recover=recover, reason=reason
        )
    finally:
        session.close()
    if as_json:
        echo_json(out.to_json())
    else:
        click.echo(f"stop {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}")
    raise_for(out)
