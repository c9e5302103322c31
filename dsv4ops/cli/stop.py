"""`dsv4ops stop`: drain and stop router, decode, prefill; nothing of ours left, ports closed."""

from __future__ import annotations

import click

from dsv4ops.cli._output import (
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    target_option,
    yes_option,
)


@click.command()
@target_option
@yes_option
@json_option
@click.option(
    "--recover", is_flag=True, help="Resolve an interrupted operation (stale lock) first."
)
@reason_option
@click.option("--dry-run", is_flag=True, help="Print the stop plan; change nothing.")
def stop(
    target: str | None, yes: bool, as_json: bool, recover: bool, reason: str | None, dry_run: bool
) -> None:
    """Stop the whole deployment in the safe order (journaled)."""
    if dry_run:
        _dry_run(target, as_json)
        return
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases.stop import raise_for, run_stop

    session = open_target(target, verb="stop")
    try:
        if not yes:
            click.confirm(f"stop everything on {session.target.name}?", abort=True)
        out = run_stop(session, progress=progress_printer(as_json), recover=recover, reason=reason)
    finally:
        session.close()
    if as_json:
        echo_json(out.to_json())
    else:
        echo_lines([f"stop {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}"])
    raise_for(out)


def _dry_run(target: str | None, as_json: bool) -> None:
    """The stop's steps, as `deploy --dry-run` prints a deploy's."""
    from dsv4ops.usecases.stop import stop_plan

    plan = stop_plan(target)  # drain, router, decode, prefill: what `stop` runs
    if as_json:
        echo_json(plan.to_json())
        return
    echo_lines(plan.lines())
