"""`dsv4ops canary`: run a stress-canary suite and print its verdict.

Exit codes: 0 PASS, 2 FAIL, 4 INCONCLUSIVE (1 when the canary could not run at all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dsv4ops import exitcodes
from dsv4ops.cli._output import NAMED, echo_json, echo_lines, json_option, table, target_option
from dsv4ops.cli._params import HTTP_URL, FiniteFloatRange
from dsv4ops.constants import MAX_CONCURRENCY
from dsv4ops.jsontypes import JSONObject

if TYPE_CHECKING:
    from dsv4ops.usecases.canary import CanaryEndpoint

SUITES = ("smoke", "corruption", "abort-cascade", "sweep", "soak", "all")


@click.command("canary")
@target_option
@click.option(
    "--profile",
    "-p",
    "profile_ref",
    type=NAMED,
    default=None,
    help="Profile whose `canary` thresholds and buckets apply (default: the deployed one).",
)
@click.option("--suite", "-s", type=click.Choice(SUITES), required=True, help="Suite to run.")
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(min=1, max=MAX_CONCURRENCY),
    default=None,
    help="Streams (sweep: the highest staircase level).",
)
@click.option(
    "--rate",
    type=FiniteFloatRange(min=0.01),
    default=None,
    help="smoke/soak: open-loop Poisson arrivals per second (capped at --concurrency).",
)
@click.option(
    "--duration", "-d", type=FiniteFloatRange(min=0.1), default=None, help="Seconds of load."
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write report.json, report.md and PNG plots into this directory.",
)
@click.option(
    "--url",
    type=HTTP_URL,
    default=None,
    help="OpenAI-compatible endpoint (e.g. the router) instead of --target.",
)
@click.option(
    "--worker-url",
    "worker_urls",
    type=HTTP_URL,
    multiple=True,
    help="Prefill/decode server URL for /metrics and /abort_request (repeatable).",
)
@click.option(
    "--model",
    type=NAMED,
    default=None,
    help="Model name sent in requests (default: the profile's).",
)
@click.option(
    "--api-key-env",
    default=None,
    metavar="NAME",
    help="With --url: the environment variable holding the router's API key, sent as a bearer "
    "(default: the --profile's router.api_key; the key itself is never an argument).",
)
@json_option
def canary(
    target: str | None,
    profile_ref: str | None,
    suite: str,
    concurrency: int | None,
    rate: float | None,
    duration: float | None,
    report_dir: str | None,
    url: str | None,
    worker_urls: tuple[str, ...],
    model: str | None,
    api_key_env: str | None,
    as_json: bool,
) -> None:
    """Run stress canaries (smoke, corruption, abort-cascade, sweep, soak, all) and report a
    verdict: exit 0 PASS, 2 FAIL, 4 INCONCLUSIVE."""
    from dsv4ops.usecases.canary import run_canary

    endpoint = _endpoint(target, profile_ref, url, worker_urls, model, api_key_env)
    from dsv4ops.cli._context import progress_printer  # lines made terminal-safe

    progress = progress_printer(as_json)
    result = run_canary(
        endpoint,
        suite,
        concurrency=concurrency,
        duration_s=duration,
        rate_per_s=rate,
        report_dir=report_dir,
        progress=progress,
    )
    if as_json:
        echo_json({**result.to_json(), "report_dir": report_dir, "exit": result.exit_code})
    else:
        rows = [
            (r.suite, r.verdict.value, _headline(r.metrics))
            for r in (result.sub_results or [result])
        ]
        click.echo(table(rows, ["suite", "verdict", "output tok/s / TTFT p99 ms (client wall)"]))
        # The reasons quote what the servers answered (an error body, a /metrics label).
        echo_lines([f"  {line}" for line in result.reasons])
        if report_dir:
            click.echo(f"report: {report_dir}/report.md")
        # the verdict's exit code (canary.verdict.Verdict.exit_code), never its word
        color = {exitcodes.OK: "green", exitcodes.FAILED: "red"}.get(result.exit_code, "yellow")
        click.secho(f"canary {suite}: {result.verdict.value}", fg=color, bold=True)
    # The verdict is the exit status (0/2/4): click hands it to cli.main, the one boundary.
    click.get_current_context().exit(result.exit_code)


def _endpoint(
    target: str | None,
    profile_ref: str | None,
    url: str | None,
    worker_urls: tuple[str, ...],
    model: str | None,
    api_key_env: str | None,
) -> CanaryEndpoint:
    """`--url` as given; else the target's session (its journal of record, read as `status`
    reads it: the cache when the target cannot be reached), closed once the endpoint is known."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.canary import resolve_endpoint

    if url:
        return resolve_endpoint(None, profile_ref, url, worker_urls, model, api_key_env)
    if api_key_env:
        raise click.UsageError("--api-key-env goes with --url (a target's key is its profile's)")
    session = open_target(target, verb="canary", http_only=True, read_only=True)
    try:
        return resolve_endpoint(session, profile_ref, url, worker_urls, model)
    finally:
        session.close()


def _headline(metrics: JSONObject) -> str:
    s = metrics.get("summary") or {}
    if not s.get("completed"):
        return "-"
    return f"{s['output_throughput']:.0f} / {s.get('p99_ttft_ms') or float('nan'):.0f}"
