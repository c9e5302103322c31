"""`dsv4ops monitoring render`: Prometheus scrape config and alert rules for a deployed profile."""

from __future__ import annotations

from pathlib import Path

import click

from dsv4ops.cli._output import echo_json, json_option, target_option
from dsv4ops.cli._params import FiniteFloatRange


@click.group()
def monitoring() -> None:
    """Alert rules and scrape configs for the PD unit (no dsv4ops process needed to run them)."""


@monitoring.command("render")
@click.argument("profile")
@target_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write prometheus.yml, dsv4ops-alerts.yml and dsv4ops-dashboard.json here (default: "
    "print the rules); files this command did not write are left alone (see --force).",
)
@click.option(
    "--scrape-interval",
    type=FiniteFloatRange(min=0.1, max=300.0),
    default=5.0,
    show_default=True,
    help="Seconds between scrapes (and rule evaluations).",
)
@click.option(
    "--max-step-ms",
    type=FiniteFloatRange(min=1.0, max=10_000.0),
    default=150.0,
    show_default=True,
    help="Slowest decode step to allow for in the wedge window.",
)
@click.option(
    "--law-a-ms",
    type=FiniteFloatRange(min=0.0, max=10_000.0),
    default=18.0,
    show_default=True,
    help="Dashboard: the step-time law's fixed cost (a canary "
    "sweep fits it; the default is the seeds' box).",
)
@click.option(
    "--law-b-ms",
    type=FiniteFloatRange(min=0.0, max=1_000.0),
    default=1.05,
    show_default=True,
    help="Dashboard: the law's cost per running request.",
)
@click.option(
    "--runbook-url",
    envvar="DSV4OPS_RUNBOOK_URL",
    default=None,
    metavar="BASE",
    help="Where the runbooks are published: each alert links BASE/runbooks/NAME.md "
    "(default: the path in the project; $DSV4OPS_RUNBOOK_URL).",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --out: replace files of the same name that this command did not write (each "
    "kept as NAME.bak).",
)
@json_option
def render_cmd(
    profile: str,
    target: str | None,
    out_dir: Path | None,
    scrape_interval: float,
    max_step_ms: float,
    law_a_ms: float,
    law_b_ms: float,
    runbook_url: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Render the rules, the scrape config and the Grafana dashboard for PROFILE as deployed
    on the target."""
    from dsv4ops import _yaml
    from dsv4ops.usecases.monitoring import render_monitoring
    from dsv4ops.usecases.monitoring_files import write_rendered

    files = render_monitoring(
        profile,
        target,
        scrape_interval_s=scrape_interval,
        max_step_ms=max_step_ms,
        law_a_ms=law_a_ms,
        law_b_ms=law_b_ms,
        runbook_url=runbook_url,
    )
    config, rules, board = files.prometheus, files.rules, files.dashboard
    if as_json:
        echo_json({"prometheus": config, "rules": rules, "dashboard": board})
        return
    if out_dir is None:
        click.echo(_yaml.dump(rules), nl=False)
        return
    written = write_rendered(files, out_dir, force=force)
    click.echo("wrote " + ", ".join(str(p) for p in written))
