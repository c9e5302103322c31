"""`dsv4ops canary`: run a stress-canary suite and print its verdict.

Exit codes: 0 PASS, 2 FAIL, 4 INCONCLUSIVE (1 when the canary could not run at all).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from dsv4ops.cli._output import echo_json, json_option, table, target_option
from dsv4ops.errors import CanaryError

if TYPE_CHECKING:
    from dsv4ops.canary import Thresholds
    from dsv4ops.deployment import Deployment
    from dsv4ops.profiles import Profile

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
        suite, endpoint.base_url, worker_urls=endpoint.worker_urls, thresholds=endpoint.thresholds,
        buckets=endpoint.buckets, concurrency=concurrency, duration_s=duration,
        report_dir=report_dir, progress=progress, model=model or endpoint.model, rate_per_s=rate,
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


@dataclass(frozen=True)
class _Endpoint:
    base_url: str
    worker_urls: tuple[str, ...]
    thresholds: Thresholds
    buckets: tuple[int, ...]
    model: str


def _resolve(target: str | None, profile_ref: str | None, url: str | None,
             worker_urls: tuple[str, ...]) -> _Endpoint:
    """Where to send load: --url as given, else the target's deployed (or --profile rendered) PD.
    Thresholds, buckets and model come from --profile when given, else from the deployment."""
    from dsv4ops.canary import Thresholds, thresholds_from_profile

    profile = None
    if profile_ref:
        from dsv4ops.profiles import load_profile

        profile = load_profile(profile_ref)
    if url:
        if profile is None:
            return _Endpoint(url, worker_urls, Thresholds(), (), "default")
        return _Endpoint(url, worker_urls, thresholds_from_profile(profile),
                         profile.flags.decode_buckets, profile.model.request_name)
    d = _deployment(target, profile)
    workers = worker_urls or tuple(c.client_url() for c in d.in_order(("prefill", "decode")))
    return _Endpoint(d.component("router").client_url(), workers,
                     thresholds_from_profile(profile if profile is not None else d.canary_settings),
                     profile.flags.decode_buckets if profile is not None else d.decode_buckets,
                     profile.model.request_name if profile is not None else d.model_name)


def _deployment(target: str | None, profile: Profile | None) -> Deployment:
    """The target's deployed Deployment (the journal's), else the profile rendered for it."""
    from dsv4ops.journal.store import Journal
    from dsv4ops.profiles import DEFAULT_TARGET, get_target, render

    name = target or DEFAULT_TARGET
    op = Journal(name).deployed()
    if op is not None and op.components:
        return op.deployment()
    if profile is not None:
        return render(profile, get_target(name))
    raise CanaryError(f"the journal records no running deployment on target {name!r}",
                      hint="pass --profile P to use its rendered ports, or --url")
