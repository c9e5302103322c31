"""`dsv4ops journal`: deployments, rollbacks and stops: when, who, profile, commit, outcome, why."""

from __future__ import annotations

import click

from dsv4ops.cli._output import echo_json, json_option, table, target_option


@click.command()
@target_option
@json_option
@click.option("--limit", type=int, default=20, show_default=True, help="Newest N entries.")
def journal(target: str | None, as_json: bool, limit: int) -> None:
    """List the target's journal, newest last."""
    from dsv4ops.journal.store import Journal
    from dsv4ops.profiles.targets import DEFAULT_TARGET

    j = Journal(target or DEFAULT_TARGET)
    ops = j.operations()[-limit:] if limit > 0 else j.operations()
    if as_json:
        echo_json(
            {
                "target": j.target,
                "path": str(j.path),
                "skipped_lines": j.skipped_lines,
                "entries": [o.summary() for o in ops],
            }
        )
        return
    if not ops:
        click.echo(f"journal {j.path}: empty")
        return
    rows = []
    for o in ops:
        s = o.summary()
        why = (
            (s["message"] or s["reason"] or "").splitlines()[0]
            if (s["message"] or s["reason"])
            else ""
        )
        if s["in_flight"]:
            why = f"IN FLIGHT: {s['in_flight']}"
        rows.append(
            [
                s["when"],
                s["kind"],
                s["id"],
                s["who"],
                s["profile"] or s["package"] or "-",
                (s["commit"] or "-")[:10],
                s["status"],
                why[:90],
            ]
        )
    click.echo(table(rows, ["when", "kind", "id", "who", "profile", "commit", "outcome", "reason"]))
    if j.skipped_lines:
        click.echo(f"note: skipped torn line(s) {j.skipped_lines} (an interrupted write)", err=True)
