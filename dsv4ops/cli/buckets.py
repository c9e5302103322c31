"""`dsv4ops buckets plan`: the decode CUDA-graph buckets for the traffic a deployment sees."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import NAMED, echo_json, echo_lines, json_option, table
from dsv4ops.cli._params import HTTP_URL, FiniteFloatRange
from dsv4ops.usecases.buckets import MAX_WINDOW_S

# 1 TiB in MB: more than any GPU holds; `--graph-mb 1e308` summed to "inf" in the table
MAX_MB = 1024.0 * 1024.0

if TYPE_CHECKING:
    from dsv4ops.usecases.buckets_plan import BucketPlan


@click.group()
def buckets() -> None:
    """Plan decode CUDA-graph buckets from observed traffic and the step law."""


@buckets.command("plan")
@click.option(
    "--from",
    "report",
    type=click.Path(path_type=Path),
    default=None,
    help="A canary (sweep) or ab report: report.json, or the --report DIR that holds it.",
)
@click.option(
    "--distribution",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help='JSON: a list of running batch sizes, or {"size": weight}.',
)
@click.option(
    "--metrics-url", type=HTTP_URL, default=None, help="A live decode's /metrics to sample."
)
@click.option(
    "--window",
    type=FiniteFloatRange(min=1.0, max=MAX_WINDOW_S),
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
    type=FiniteFloatRange(min=0.0, max=MAX_MB),
    default=None,
    help="Graph memory per bucket in MB (for the memory budget and the table); a live "
    "decode's sglang:graph_memory_usage_gb is used instead when observed.",
)
@click.option(
    "--memory-mb",
    type=FiniteFloatRange(min=0.0, max=MAX_MB),
    default=None,
    help="Budget for all graphs' memory in MB (with --graph-mb).",
)
@click.option(
    "--profile",
    "profile",
    type=NAMED,
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
    from dsv4ops.cli._context import live_waits
    from dsv4ops.usecases.buckets_plan import plan_buckets

    plan = plan_buckets(
        report=report,
        distribution=distribution,
        metrics_url=metrics_url,
        window_s=window,
        law=law,
        max_buckets=max_buckets,
        max_bs=max_bs,
        graph_mb=graph_mb,
        memory_mb=memory_mb,
        profile=profile,
        waits=live_waits(),  # a --metrics-url window is sampled for up to --window seconds
    )
    if as_json:
        echo_json(plan.to_json())
        return
    _print_plan(plan)


def _print_plan(plan: BucketPlan) -> None:
    """The plan as text: the inputs, each ladder's expected cost, and the commands to try it.
    Printed terminal-safe: the source and its notes come from a report file or a /metrics."""
    step_law, dist, k, source = plan.step_law, plan.dist, plan.graph_budget, plan.source
    kept, profile, memory, evals = plan.kept, plan.profile, plan.memory, plan.evals
    lines = [
        f"step law {step_law.a_ms:g} + {step_law.b_ms:g}·bs ms ({plan.law_source.words}); "
        f"{len(dist)} batch sizes observed ({min(dist)}..{max(dist)}); at most {k} graphs"
    ]
    if source is not None:
        lines.append(f"from {source.source}")
    if plan.measured_context is not None:
        lines.append(f"decode context length in the sweep: {plan.measured_context}")
    if plan.context_note:
        lines.append(f"note: {plan.context_note}")
    if kept:
        lines.append(
            f"kept from {profile} below the sweep's lowest level {min(dist)} (a sweep says "
            f"nothing about smaller batches): {' '.join(map(str, kept))}"
        )
    lines.append(memory.sentence)
    if plan.budget_note:
        lines.append(f"note: {plan.budget_note}")
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
    lines.append(
        table(rows, ["ladder", "graphs", "tok/s", "step ms", "pad/step", "eager", "graph MB"])
    )
    worst = sorted(evals[0].waste_by_bucket.items(), key=lambda kv: -kv[1])[:5]
    lines += [
        "planned: " + " ".join(map(str, plan.best)),
        "most padding (planned): " + ", ".join(f"{b}: {w:.2f} slots/step" for b, w in worst),
        f"make it a revision:  {plan.command}",
        f"then prove it:       dsv4ops ab {profile} {profile}-planned --suite sweep",
    ]
    echo_lines(lines)
