"""`dsv4ops rollback`: redeploy the last known-good (or a named) deployment, exactly as recorded."""

from __future__ import annotations

import click

from dsv4ops.cli._output import (
    NAMED,
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    target_option,
    terminal_safe,
    yes_option,
)


@click.command()
@target_option
@click.option(
    "--to",
    "to",
    type=NAMED,
    default=None,
    metavar="ID|REV",
    help="Journal id (prefix) or git commit.",
)
@yes_option
@json_option
@click.option(
    "--recover",
    is_flag=True,
    help="Resolve an interrupted operation (stale lock) first; refused when there is none.",
)
@click.option(
    "--canary", is_flag=True, help="Also run the canary (the end-to-end probe always runs)."
)
@reason_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what it would restore and why it is known-good; change nothing.",
)
def rollback(
    target: str | None,
    to: str | None,
    yes: bool,
    as_json: bool,
    recover: bool,
    canary: bool,
    reason: str | None,
    dry_run: bool,
) -> None:
    """Roll back to the last known-good deployment through the same safe path."""
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases.rollback import (
        choose_rollback,
        raise_for,
        refuse_nothing_to_recover,
        run_rollback,
    )

    progress = progress_printer(as_json)
    session = open_target(target, verb="rollback")
    try:
        choice = choose_rollback(session, to)
        if recover:
            refuse_nothing_to_recover(session, choice)
        if dry_run:
            plan = choice.to_json(session.target.name, session.journal.judged().get(choice.op.op))
            if as_json:
                echo_json(plan)
            else:
                # The journal's words (a profile name, why it is known-good): terminal-safe.
                echo_lines(
                    [
                        f"plan: {choice.question(session.target.name).rstrip('?')}, rebuilt "
                        f"from {choice.how}; {plan['known_good_why']} (dry run: nothing is "
                        "changed)"
                    ]
                )
            return
        if not yes:
            click.confirm(terminal_safe(choice.question(session.target.name)), abort=True)
        out = run_rollback(
            session, choice, progress=progress, canary=canary, recover=recover, reason=reason
        )
    finally:
        session.close()
    if as_json:
        echo_json(out.to_json())
    else:
        echo_lines(
            [f"{out.kind} {out.status} in {out.total_s:.1f}s: {out.message.splitlines()[0]}"]
        )
    raise_for(out)
