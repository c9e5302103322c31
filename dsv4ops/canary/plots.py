"""PNG plots for the report (matplotlib, imported here only, with the Agg backend)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from dsv4ops.canary.fit import pad_to_bucket
from dsv4ops.canary.verdict import SuiteResult
from dsv4ops.jsontypes import JSONObject

_LAT = (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2e_latency", "E2E"))


def write_plots(result: SuiteResult, directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    for r in result.sub_results or [result]:
        if r.metrics.get("levels"):
            written.append(_sweep_plot(plt, r.metrics, directory / f"{r.suite}-sweep.png"))
        summary = r.metrics.get("summary") or {}
        if summary.get("completed"):
            written.append(
                _latency_plot(plt, r.suite, summary, directory / f"{r.suite}-latency.png")
            )
        if summary.get("output_tokens_per_s_buckets"):
            written.append(
                _timeline_plot(plt, r.suite, summary, directory / f"{r.suite}-throughput.png")
            )
    return written


def _sweep_plot(plt: ModuleType, m: JSONObject, path: Path) -> Path:
    levels = m["levels"]
    buckets = m.get("buckets") or []
    fits = m.get("fit") or {}
    xs = [p["bs"] for p in levels]
    grid = list(range(max(1, int(min(xs) // 2)), int(max(xs)) + 2))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    sources = (
        (
            "client timestamps",
            fits.get("padded_bs") or fits.get("bs"),
            "step_ms",
            "output_tok_s",
            "C0",
        ),
        ("server metrics", fits.get("metrics"), "step_ms_metrics", "output_tok_s_metrics", "C1"),
    )
    for label, law, step_key, tput_key, color in sources:
        pts = [(p["bs"], p[step_key], p.get(tput_key)) for p in levels if p.get(step_key)]
        if not pts:
            continue
        ax2.plot(
            [p[0] for p in pts], [p[1] for p in pts], "o", color=color, label=f"step ({label})"
        )
        tput = [(p[0], p[2]) for p in pts if p[2]]
        if tput:
            ax1.plot(*zip(*tput, strict=True), "o-", color=color, label=f"measured ({label})")
        if law:
            padded = [pad_to_bucket(x, buckets) if law["x"] == "padded_bs" else x for x in grid]
            step = [law["a_ms"] + law["b_ms"] * p for p in padded]
            text = f"{law['a_ms']:.2f} + {law['b_ms']:.3f}·bs ms, R² {law['r2']:.3f}"
            ax2.plot(grid, step, "-", color=color, alpha=0.5, label=f"law ({label}): {text}")
            ax1.plot(
                grid,
                [1000.0 * x / s for x, s in zip(grid, step, strict=True)],
                "-",
                color=color,
                alpha=0.4,
                label=f"law ({label}); ceiling 1000/b = {law['ceiling_tok_s']:.0f}",
            )
    for b in buckets:
        if grid[0] <= b <= grid[-1]:
            for ax in (ax1, ax2):
                ax.axvline(b, color="red", alpha=0.15, lw=1)
    clock = m.get("clock") or {}
    scale = clock.get("time_scale", 1.0)
    on = "model time" + (f", twin time scale {scale:g}" if scale != 1.0 else "")
    ax1.set(
        xlabel="running batch", ylabel=f"output tok/s ({on})", title="throughput vs concurrency"
    )
    ax2.set(
        xlabel="running batch",
        ylabel=f"decode step (ms, {on})",
        title="step time vs concurrency (red lines: CUDA-graph buckets)",
    )
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _latency_plot(plt: ModuleType, suite: str, s: JSONObject, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4))
    stats = ("median", "p90", "p99")
    width = 0.25
    for i, stat in enumerate(stats):
        vals = [s.get(f"{stat}_{key}_ms") or 0.0 for key, _ in _LAT]
        ax.bar([j + i * width for j in range(len(_LAT))], vals, width, label=stat)
    ax.set_xticks([j + width for j in range(len(_LAT))], [label for _, label in _LAT])
    ax.set_yscale("log")
    ax.set(ylabel="ms (log)", title=f"{suite}: latency percentiles")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _timeline_plot(plt: ModuleType, suite: str, s: JSONObject, path: Path) -> Path:
    buckets = s["output_tokens_per_s_buckets"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.step(range(len(buckets)), buckets, where="post")
    ax.set(
        xlabel="seconds since start",
        ylabel="output tok/s",
        title=f"{suite}: output tokens per second",
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
