"""`dsv4ops buckets plan`: the decode CUDA-graph buckets for the traffic a deployment sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dsv4ops.cli._output import echo_json, json_option, table
from dsv4ops.errors import DsOpsError


@click.group()
def buckets() -> None:
    """Plan decode CUDA-graph buckets from observed traffic and the step law."""


@buckets.command("plan")
@click.option(
    "--from",
    "report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A canary (sweep) report.json: its levels and fitted law.",
)
@click.option(
    "--distribution",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help='JSON: a list of running batch sizes, or {"size": weight}.',
)
@click.option("--metrics-url", default=None, help="A live decode's /metrics to sample.")
@click.option(
    "--window",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to sample --metrics-url for.",
)
@click.option(
    "--law", default=None, help="A_MS,B_MS of the step law (default: the report's, else 18,1.05)."
)
@click.option("--max-buckets", type=click.IntRange(min=1, max=256), default=16, show_default=True)
@click.option(
    "--max-bs",
    type=click.IntRange(min=1, max=8192),
    default=96,
    show_default=True,
    help="The decode's largest batch (max_running_requests; always a bucket).",
)
@click.option(
    "--graph-mb",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Graph memory per bucket in MB (for the memory budget and the table); a live "
    "decode's sglang:graph_memory_usage_gb is used instead when observed.",
)
@click.option(
    "--memory-mb",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Budget for all graphs' memory in MB (with --graph-mb).",
)
@click.option(
    "--profile",
    "profile",
    default="baseline",
    show_default=True,
    help="The profile the printed `profile set` command starts from.",
)
@json_option
def plan_cmd(
    report: Path | None,
    distribution: Path | None,
    metrics_url: str | None,
    window: float,
    law: str | None,
    max_buckets: int,
    max_bs: int,
    graph_mb: float | None,
    memory_mb: float | None,
    profile: str,
    as_json: bool,
) -> None:
    """The bucket list with the least expected time per generated token (exact)."""
    from dsv4ops.buckets import plan as P
    from dsv4ops.profiles.buckets import resolve_buckets

    if sum(x is not None for x in (report, distribution, metrics_url)) != 1:
        raise DsOpsError(
            "give exactly one of --from REPORT, --distribution FILE, --metrics-url URL"
        )
    counts, step_law, observed_gb, captured, source = _read_counts(
        report, distribution, metrics_url, window, law
    )
    step_law = step_law or P.StepLaw()
    try:
        dist = P.normalise(counts)
    except ValueError as exc:
        raise DsOpsError(str(exc)) from None
    memory = P.graph_memory_estimate(graph_mb, observed_gb, captured)
    graph_mb = memory.mb_per_graph
    k = P.graph_budget(max_buckets, graph_mb, memory_mb)
    kept = _kept_below(source, dist, profile, max_bs)
    if len(kept) >= k:
        raise DsOpsError(
            f"--max-buckets {k}: the {len(kept)} buckets {profile} has below the "
            f"sweep's lowest level leave no graph to plan",
            hint="raise --max-buckets",
        )
    best = sorted({*kept, *P.plan(dist, max_buckets=k - len(kept), max_bs=max_bs)})
    ladders = {
        "planned": best,
        "step8": resolve_buckets("step8", tp_size=4, max_running_requests=max_bs),
        "step4:40-96": resolve_buckets("step4:40-96", tp_size=4, max_running_requests=max_bs),
        "sglang-default": resolve_buckets("sglang-default", tp_size=4, max_running_requests=max_bs),
    }
    evals = [P.evaluate(name, dist, b, step_law, graph_mb) for name, b in ladders.items()]
    command = (
        f"dsv4ops profile set {profile} buckets={','.join(map(str, best))} "
        f"--as {profile}-planned"
    )
    if as_json:
        echo_json(
            {
                "law": {"a_ms": step_law.a_ms, "b_ms": step_law.b_ms},
                "graph_budget": k,
                "distribution": {str(n): round(p, 5) for n, p in dist.items()},
                "graph_memory": {
                    "mb_per_graph": memory.mb_per_graph,
                    "source": memory.source,
                    "observed_gb": observed_gb,
                    "captured_graphs": captured,
                },
                "ladders": [e.to_json() for e in evals],
                "command": command,
                "source": source.source if source else None,
                "kept_below": kept,
            }
        )
        return
    _print_plan(step_law, dist, k, source, kept, profile, memory, evals, best, command)


def _read_counts(
    report: Path | None,
    distribution: Path | None,
    metrics_url: str | None,
    window: float,
    law: str | None,
) -> tuple[Any, Any, float | None, int | None, Any]:
    """The observed batch sizes from the one source given: a canary report (with its step law),
    a distribution file, or a live decode's /metrics (with its graph memory)."""
    from dsv4ops.buckets import sources as S

    step_law = S.parse_law(law) if law else None
    observed_gb: float | None = None
    captured: int | None = None
    source: S.ReportLevels | None = None
    if report is not None:
        source = S.from_report(report)
        counts, step_law = source.counts, step_law or source.law
    elif distribution is not None:
        counts = S.from_file(distribution)
    else:
        from dsv4ops.orchestrate.usecases.buckets import sample_decode

        live = sample_decode(str(metrics_url), window_s=window)
        counts, observed_gb, captured = live.counts, live.graph_memory_gb, live.captured_graphs
    return counts, step_law, observed_gb, captured, source


def _print_plan(
    step_law: Any,
    dist: dict[int, float],
    k: int,
    source: Any,
    kept: list[int],
    profile: str,
    memory: Any,
    evals: list[Any],
    best: list[int],
    command: str,
) -> None:
    """The plan as text: the inputs, each ladder's expected cost, and the commands to try it."""
    click.echo(
        f"step law {step_law.a_ms:g} + {step_law.b_ms:g}·bs ms; {len(dist)} batch sizes "
        f"observed ({min(dist)}..{max(dist)}); at most {k} graphs"
    )
    if source is not None:
        click.echo(f"from {source.source}")
    if kept:
        click.echo(
            f"kept from {profile} below the sweep's lowest level {min(dist)} (a sweep says "
            f"nothing about smaller batches): {' '.join(map(str, kept))}"
        )
    click.echo(memory.sentence)
    rows = [
        [
            e.name,
            e.graphs,
            f"{e.tok_s:.1f}",
            f"{e.mean_step_ms:.2f}",
            f"{e.expected_padding:.2f}",
            f"{100 * e.eager_share:.1f}%",
            "-" if e.graph_memory_mb is None else f"{e.graph_memory_mb:g}",
        ]
        for e in evals
    ]
    click.echo(
        table(rows, ["ladder", "graphs", "tok/s", "step ms", "pad/step", "eager", "graph MB"])
    )
    worst = sorted(evals[0].waste_by_bucket.items(), key=lambda kv: -kv[1])[:5]
    click.echo("planned: " + " ".join(map(str, best)))
    click.echo("most padding (planned): " + ", ".join(f"{b}: {w:.2f} slots/step" for b, w in worst))
    click.echo(f"make it a revision:  {command}")
    click.echo(f"then prove it:       dsv4ops ab {profile} {profile}-planned --suite sweep")


def _kept_below(source: object, dist: dict[int, float], profile: str, max_bs: int) -> list[int]:
    """A sweep's levels are a staircase, not traffic: nothing was observed below its lowest level,
    so planning there would drop every small bucket (a live decode at 4 running would then run
    the graph of the lowest level). The profile's own buckets below it are kept as they are."""
    if source is None or not getattr(source, "staircase", False):
        return []
    from dsv4ops.profiles import load_profile

    floor = min(dist)
    return [b for b in load_profile(profile).flags.decode_buckets if b < floor and b < max_bs]
