"""`dsv4ops twin hazard NAME --state force|off|auto`: switch a twin hazard (twin targets only).

Runbook rehearsals use it to reproduce each incident; on a real target it is refused (exit 1).
"""

from __future__ import annotations

import click

from dsv4ops.cli._output import echo_json, json_option, target_option


@click.group()
def twin() -> None:
    """The twin's own switches (docs/twin.md, "Failure modes")."""


@twin.command("hazard")
@click.argument("name", type=click.Choice(["degrade", "wedge", "corrupt"]))
@click.option(
    "--state",
    required=True,
    type=click.Choice(["force", "off", "auto"]),
    help="force: on now; off: never; auto: on exactly when its condition holds.",
)
@target_option
@json_option
def hazard(name: str, state: str, target: str | None, as_json: bool) -> None:
    """Force, clear or re-arm one hazard of the running twin deployment."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.profiles import get_target
    from dsv4ops.runbooks.hazard import WHAT, check_twin, set_hazard

    t = get_target(target)
    check_twin(t.name, t.launcher)
    ctx = open_target(t.name, verb="twin hazard")
    try:
        result = set_hazard(ctx.supervisor, ctx.journal, target=t.name, hazard=name, state=state)
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    click.echo(f"{name} ({WHAT[name]}) is now {state} on the {result['component']} of {t.name}")
