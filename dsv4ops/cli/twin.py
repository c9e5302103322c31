"""`dsv4ops twin hazard NAME --state force|off|auto`: switch a twin hazard (twin targets only).

Runbook rehearsals use it to reproduce each incident; on a real target it is refused (exit 1).
It takes the flags every mutating command takes (cli/_output.py): it asks first unless
`--yes`, `--dry-run` says what it would send and where, `--reason` is journaled with the switch.
The switch holds the target's deploy lock, as deploy does (usecases/hazard.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import click

from dsv4ops.cli._output import (
    dry_run_option,
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    target_option,
    terminal_safe,
    yes_option,
)

# twin/config.py HAZARD_NAMES (the CLI layer does not import the twin; a test keeps them equal)
HAZARDS = ("degrade", "wedge", "corrupt", "slow_health", "lost_transfer", "stream_tools")


@click.group()
def twin() -> None:
    """The twin's own switches (docs/twin.md, "Failure modes")."""


@twin.command("hazard")
@click.argument("name", type=click.Choice(HAZARDS))
@click.option(
    "--state",
    required=True,
    type=click.Choice(["force", "off", "auto"]),
    help="force: on now; off: never; auto: on exactly when its condition holds.",
)
@target_option
@json_option
@yes_option
@reason_option
@dry_run_option
def hazard(
    name: str,
    state: str,
    target: str | None,
    as_json: bool,
    yes: bool,
    reason: str | None,
    dry_run: bool,
) -> None:
    """Force, clear or re-arm one hazard of the running twin deployment (journaled)."""
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases.hazard import switch_hazard
    from dsv4ops.usecases.twin import (
        WHAT,
        plan_twin_hazard,
        twin_target,
    )

    name_of_target = twin_target(target)
    ctx = open_target(name_of_target, verb="twin hazard", read_only=dry_run)
    try:
        planned = plan_twin_hazard(ctx, name, state)
        if dry_run:
            _print_dry_run(planned, name_of_target, as_json)
            return
        if not yes:
            click.confirm(
                terminal_safe(
                    f"set {name} ({WHAT[name]}) to {state} on the {planned['component']} "
                    f"of {name_of_target}?"
                ),
                abort=True,
            )
        result = switch_hazard(
            ctx, hazard=name, state=state, reason=reason, progress=progress_printer(as_json)
        )
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    echo_lines(  # the component is the server's answer: terminal-safe
        [f"{name} ({WHAT[name]}) is now {state} on the {result['component']} of {name_of_target}"]
    )


def _print_dry_run(planned: Mapping[str, object], target: str, as_json: bool) -> None:
    if as_json:
        echo_json({"dry_run": True, "target": target, **planned})
        return
    echo_lines(  # the URL and component come from the journal's record: terminal-safe
        [
            f"would POST {{\"hazard\": \"{planned['hazard']}\", \"state\": "
            f"\"{planned['state']}\"}} to {planned['url']} (the {planned['component']} of "
            f"{target}); dry run: nothing is sent"
        ]
    )
