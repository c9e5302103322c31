"""`dsv4ops canary`: run a stress-canary suite and print its verdict.

Exit codes: 0 PASS, 2 FAIL, 4 INCONCLUSIVE (1 when the canary could not run at all).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from dsv4ops.cli._output import echo_json, json_option, table, target_option
from dsv4ops.errors import CanaryError

SUITES = ("smoke", "corruption", "abort-cascade", "sweep", "soak", "all")


@click.command("canary")
@target_option
@click.option("--profile", "-p", "profile_ref", default=None,
              help="Profile whose `canary` thresholds and buckets apply (default: the deployed one).")
@click.option("--suite", "-s", type=click.Choice(SUITES), required=True, help="Suite to run.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help="Streams (sweep: the highest staircase level).")
@click.option("--rate", type=click.FloatRange(min=0.01), default=None,
              help="smoke/soak: open-loop Poisson arrivals per second (capped at --concurrency).")
@click.option("--duration", "-d", type=click.FloatRange(min=0.1), default=None, help="Seconds of load.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False), default=None,
              help="Write report.json, report.md and PNG plots into this directory.")
@click.option("--url", default=None, help="OpenAI-compatible endpoint (e.g. the router) instead of --target.")
@click.option("--worker-url", "worker_urls", multiple=True,
              help="Prefill/decode server URL for /metrics and /abort_request (repeatable).")
@click.option("--model", default=None, help="Model name sent in requests (default: the profile's).")
@json_option
def canary(target: str | None, profile_ref: str | None, suite: str, concurrency: int | None,
           rate: float | None, duration: float | None, report_dir: str | None, url: str | None,
           worker_urls: tuple[str, ...], model: str | None, as_json: bool) -> None:
    """Run stress canaries (smoke, corruption, abort-cascade, sweep, soak, all) and report a
    verdict: exit 0 PASS, 2 FAIL, 4 INCONCLUSIVE."""
    from dsv4ops.canary import run_suite

    endpoint = _resolve(target, profile_ref, url, worker_urls)
    progress = (lambda line: click.echo(line, err=True)) if as_json else click.echo
    result = run_suite(
        suite, endpoint["base_url"], worker_urls=endpoint["worker_urls"], profile=endpoint["profile"],
        concurrency=concurrency, duration_s=duration, report_dir=report_dir, progress=progress,
        model=model or endpoint["model"], rate_per_s=rate,
    )
    if as_json:
        echo_json({**result.to_json(), "report_dir": report_dir})
    else:
        rows = [(r.suite, r.verdict.value, _headline(r.metrics)) for r in (result.sub_results or [result])]
        click.echo(table(rows, ["suite", "verdict", "output tok/s / TTFT p99 ms"]))
        for line in result.reasons:
            click.echo(f"  {line}")
        if report_dir:
            click.echo(f"report: {report_dir}/report.md")
        color = {"PASS": "green", "FAIL": "red"}.get(result.verdict.value, "yellow")
        click.secho(f"canary {suite}: {result.verdict.value}", fg=color, bold=True)
    if result.exit_code:
        # The verdict is the exit status (0/2/4); cli.main maps SystemExit to its code.
        sys.exit(result.exit_code)


def _headline(metrics: dict[str, Any]) -> str:
    s = metrics.get("summary") or {}
    if not s.get("completed"):
        return "-"
    return f"{s['output_throughput']:.0f} / {s.get('p99_ttft_ms') or float('nan'):.0f}"


def _resolve(target: str | None, profile_ref: str | None, url: str | None,
             worker_urls: tuple[str, ...]) -> dict[str, Any]:
    """Where to send load: --url as given, else the target's deployed (or --profile rendered) PD."""
    profile = None
    if profile_ref:
        from dsv4ops.profiles import load_profile

        profile = load_profile(profile_ref)
    model = _model_of(profile)
    if url:
        return {"base_url": url, "worker_urls": worker_urls, "profile": profile, "model": model}
    if not target:
        from dsv4ops.profiles import DEFAULT_TARGET

        target = DEFAULT_TARGET
    from dsv4ops.journal.store import Journal
    from dsv4ops.orchestrate.model import deployment_from_record

    op = Journal(target).deployed()
    if op is not None and op.components:
        d = deployment_from_record(op)
        comps = {c.name: f"http://{c.host}:{c.port}" for c in d.components}
        view = profile or _RecordedProfile(d.content or {}, dict(d.flags))
        content_model = ((d.content or {}).get("model") or {})
        model = model or content_model.get("served_name") or content_model.get("path")
    elif profile is not None:
        from dsv4ops.profiles import get_target, render

        rendered = render(profile, get_target(target))
        comps = {c.name: c.url for c in rendered.components}
        view = profile
    else:
        raise CanaryError(f"the journal records no running deployment on target {target!r}",
                          hint="pass --profile P to use its rendered ports, or --url")
    workers = worker_urls or tuple(comps[n] for n in ("prefill", "decode") if n in comps)
    return {"base_url": comps["router"], "worker_urls": workers, "profile": view, "model": model or "default"}


def _model_of(profile: Any) -> str | None:
    spec = getattr(profile, "model", None)
    return (getattr(spec, "served_name", None) or getattr(spec, "path", None)) if spec else None


class _RecordedProfile:
    """The journal's record of a deployed profile, read the way the canary reads a Profile."""

    def __init__(self, content: dict[str, Any], flags: dict[str, Any]) -> None:
        self.canary = dict(content.get("canary") or {})
        self.flags = type("Flags", (), {"decode_buckets": tuple(flags.get("decode_buckets") or ())})()
