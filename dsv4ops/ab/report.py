"""The A/B report: report.json (everything), report.md (the decision first), and PNGs when
matplotlib (the `report` extra) is importable. The only module of dsv4ops.ab that writes files."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from dsv4ops.ab.analysis import Analysis
from dsv4ops.ab.decision import Decision, GateResult
from dsv4ops.ab.model import FIT_LEVEL, Arm, BlockResult, higher_is_better
from dsv4ops.jsontypes import JSONObject, JSONValue

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

REPORT_VERSION = 1


def write_report(
    directory: Path,
    *,
    a: str,
    b: str,
    schedule: Sequence[Arm],
    blocks: Sequence[BlockResult],
    analysis: Analysis,
    gates: Sequence[GateResult],
    decision: Decision,
    buckets: dict[str, list[int]] | None = None,
    experiment_op: str | None = None,
    interrupted: str | None = None,
) -> list[Path]:
    """Write the report into `directory` (created); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    record = report_record(
        a=a,
        b=b,
        schedule=schedule,
        blocks=blocks,
        analysis=analysis,
        gates=gates,
        decision=decision,
        buckets=buckets,
        experiment_op=experiment_op,
        interrupted=interrupted,
    )
    json_path = directory / "report.json"
    json_path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    md_path = directory / "report.md"
    md_path.write_text(markdown(record), encoding="utf-8")
    written = [json_path, md_path]
    try:
        import matplotlib
    except ImportError:
        return written
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written += _plots(plt, directory, record)
    return written


def _clean(x: JSONValue) -> JSONValue:
    """NaN and infinities as null: report.json is strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    return x


def report_record(
    *,
    a: str,
    b: str,
    schedule: Sequence[Arm],
    blocks: Sequence[BlockResult],
    analysis: Analysis,
    gates: Sequence[GateResult],
    decision: Decision,
    buckets: dict[str, list[int]] | None = None,
    experiment_op: str | None = None,
    interrupted: str | None = None,
) -> JSONObject:
    record: JSONObject = _clean(
        {
            "version": REPORT_VERSION,
            "kind": "ab",
            "a": a,
            "b": b,
            "experiment_op": experiment_op,
            "partial": analysis.partial or interrupted is not None,
            "interrupted": interrupted,
            "decision": decision.to_record(),
            "schedule": list(schedule),
            "gates": [g.to_record() for g in gates],
            "analysis": analysis.to_record(),
            "blocks": [blk.to_record() for blk in sorted(blocks, key=lambda x: x.index)],
            "buckets": buckets or {},
        }
    )
    return record


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def _level(c: object) -> str:
    return "fit" if c == FIT_LEVEL else str(c)


def markdown(r: JSONObject) -> str:
    d, an = r["decision"], r["analysis"]
    winner = r["a"] if d["winner"] == "A" else r["b"]
    out = [
        f"# A/B: {r['a']} (A) vs {r['b']} (B)",
        "",
        f"**Decision: {d['winner']} ({winner}).** {d['reasons'][0] if d['reasons'] else ''}",
        "",
    ]
    if r["partial"]:
        why = r["interrupted"] or "; ".join(an["notes"]) or "blocks are missing"
        out += [f"**PARTIAL**: {why}. The verdicts use the complete blocks only.", ""]
    out += [f"- {x}" for x in d["reasons"][1:]]
    out += [
        "",
        f"Schedule: {' '.join(r['schedule'])} ({len(r['blocks'])} blocks ran); "
        f"sequential design ({an.get('design', '-')}) over a budget of {an.get('looks', '-')} "
        f"pairs, confidence {an['confidence']:g} over all looks, stated deploy-to-deploy "
        f"variation ±{100 * an.get('variation', 0):g}% per block, equivalence band "
        f"±{100 * an['band']:g}%, guard band ±{100 * an.get('guard_band', 0):g}%, "
        f"experiment op {r['experiment_op'] or '-'}.",
        "",
    ]
    out += [f"Note: {n}." for n in an["notes"]] + ([""] if an["notes"] else [])
    out += [
        "## Per metric (B relative to A)",
        "",
        "| level | metric | verdict | B/A | repeated CI | signed-rank p | pairs | mean A | mean B | why |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in an["verdicts"]:
        arrow = "↑" if higher_is_better(v["metric"]) else "↓"
        out.append(
            f"| {_level(v['concurrency'])} | {v['metric']} {arrow} | {v['verdict']} | "
            f"{_fmt(v['ratio'])} | {_fmt(v['ci_low'])}-{_fmt(v['ci_high'])} | "
            f"{_fmt(v['wilcoxon_p'], '.3g')} | {v['pairs']} | {_fmt(v['mean_a'], '.4g')} | "
            f"{_fmt(v['mean_b'], '.4g')} | {v['note']} |"
        )
    out += [
        "",
        "## Drift",
        "",
        "Spearman rank correlation of block index with A's values (drift exists) and of pair time "
        "with the B/A differences (drift left in the comparison; near 0 when counterbalancing "
        "cancelled it).",
        "",
        "| level | metric | rho(index, A) | rho(time, B/A-1) |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {_level(v['concurrency'])} | {v['metric']} | {_fmt(v['drift_rho_a'], '.2f')} | "
        f"{_fmt(v['drift_rho_diff'], '.2f')} |"
        for v in an["verdicts"]
    ]
    out += [""] + _drift_flags(an["verdicts"])
    out += ["", "## Correctness gates", ""]
    out += [
        f"- {g['arm']} {g['suite']}: {'passed' if g['passed'] else 'FAILED'} ({g['reason']})"
        for g in r["gates"]
    ] or ["- none run"]
    out += [
        "",
        "## Blocks in time order",
        "",
        "| # | arm | profile | started | measured s | complete | deploy op |",
        "|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {x['index']} | {x['arm']} | {x['profile']} | {x['started_at']} | "
        f"{x['duration_s']:.0f} | {'yes' if x['complete'] else 'NO'} | {x['deploy_op'] or '-'} |"
        for x in r["blocks"]
    ]
    if r["buckets"]:
        out += ["", "## Buckets", ""]
        out += [f"- {arm}: {' '.join(map(str, b))}" for arm, b in r["buckets"].items()]
    return "\n".join(out) + "\n"


DRIFT_RHO = 0.8  # a rank correlation this strong over the blocks is called out in words


def _strong(rho: object) -> bool:
    return isinstance(rho, int | float) and abs(rho) >= DRIFT_RHO


def _drift_flags(verdicts: Sequence[Mapping[str, object]]) -> list[str]:
    drifted = [v for v in verdicts if _strong(v["drift_rho_a"])]
    left = [v for v in verdicts if _strong(v["drift_rho_diff"])]
    out = []
    if drifted:
        out.append(
            f"A's values drifted over the experiment (|rho| >= {DRIFT_RHO:g}) for "
            + ", ".join(f"{v['metric']}@{_level(v['concurrency'])}" for v in drifted)
            + "."
        )
    if left:
        out.append(
            "The B/A differences trend with time (drift not cancelled by the pairing) for "
            + ", ".join(f"{v['metric']}@{_level(v['concurrency'])}" for v in left)
            + "."
        )
    return out or [f"No strong drift (every |rho| below {DRIFT_RHO:g})."]


def _arm_series(r: JSONObject, metric: str) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per arm: (concurrency, mean, ci-ish low, high) of the block values (min..max of blocks)."""
    out: dict[str, list[tuple[int, float, float, float]]] = {"A": [], "B": []}
    levels = sorted({int(c) for x in r["blocks"] for c in x["values"]} - {FIT_LEVEL})
    for arm in out:
        for c in levels:
            vals = [
                x["values"][str(c)][metric]
                for x in r["blocks"]
                if x["arm"] == arm
                and x["complete"]
                and metric in x["values"].get(str(c), {})
                and x["values"][str(c)][metric] is not None
            ]
            if vals:
                out[arm].append((c, sum(vals) / len(vals), min(vals), max(vals)))
    return out


def _plots(plt: ModuleType, directory: Path, r: JSONObject) -> list[Path]:
    written = []
    metric = "output_tok_s"
    series = _arm_series(r, metric)
    labels = {"A": f"A: {r['a']}", "B": f"B: {r['b']}"}
    if any(series.values()):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
        for arm, color in (("A", "C0"), ("B", "C1")):
            pts = series[arm]
            if pts:
                xs = [p[0] for p in pts]
                ax1.plot(xs, [p[1] for p in pts], "o-", color=color, label=labels[arm])
                ax1.fill_between(
                    xs, [p[2] for p in pts], [p[3] for p in pts], color=color, alpha=0.2
                )
        ratios = [
            v
            for v in r["analysis"]["verdicts"]
            if v["metric"] == metric and v["ratio"] is not None and v["concurrency"] != FIT_LEVEL
        ]
        if ratios:
            xs = [v["concurrency"] for v in ratios]
            ax2.plot(xs, [v["ratio"] for v in ratios], "o-", color="C2", label="B/A")
            lo = [v["ci_low"] if v["ci_low"] is not None else v["ratio"] for v in ratios]
            hi = [v["ci_high"] if v["ci_high"] is not None else v["ratio"] for v in ratios]
            ax2.fill_between(
                xs,
                lo,
                hi,
                color="C2",
                alpha=0.25,
                label=f"{r['analysis']['confidence']:g} repeated CI",
            )
            band = r["analysis"]["band"]
            ax2.axhspan(1 - band, 1 + band, color="grey", alpha=0.15, label="equivalence band")
            ax2.axhline(1.0, color="grey", lw=0.8)
        ax1.set(
            xlabel="concurrency", ylabel="output tok/s", title="both arms (band: block min-max)"
        )
        ax2.set(xlabel="concurrency", ylabel="B/A", title="ratio with bootstrap CI")
        for ax in (ax1, ax2):
            _legend(ax, fontsize=8)
            ax.grid(alpha=0.3)
        written.append(_save(fig, plt, directory / "curves.png"))
    written += _blocks_plot(plt, directory, r, metric)
    if r["buckets"] and any(series.values()):
        written.append(_buckets_plot(plt, directory, r, series, labels))
    return written


def _blocks_plot(plt: ModuleType, directory: Path, r: JSONObject, metric: str) -> list[Path]:
    levels = sorted({int(c) for x in r["blocks"] for c in x["values"]} - {FIT_LEVEL})
    if not levels:
        return []
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for k, c in enumerate(levels):
        for arm, marker in (("A", "o"), ("B", "s")):
            pts = [
                (x["index"], x["values"][str(c)][metric])
                for x in r["blocks"]
                if x["arm"] == arm and x["values"].get(str(c), {}).get(metric) is not None
            ]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    marker,
                    color=f"C{k % 10}",
                    mfc="none" if arm == "B" else None,
                    label=f"{arm} @ {c}",
                )
    ax.set(
        xlabel="block (time order)",
        ylabel=metric,
        title="per block, in time order (drift shows as a slope)",
    )
    _legend(ax, fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return [_save(fig, plt, directory / "blocks.png")]


def _buckets_plot(
    plt: ModuleType,
    directory: Path,
    r: JSONObject,
    series: dict[str, list[tuple[int, float, float, float]]],
    labels: dict[str, str],
) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    lo = min(p[0] for pts in series.values() for p in pts)
    hi = max(p[0] for pts in series.values() for p in pts)
    for arm, color in (("A", "C0"), ("B", "C1")):
        if series[arm]:
            ax.plot(
                [p[0] for p in series[arm]],
                [p[1] for p in series[arm]],
                "o-",
                color=color,
                label=labels[arm],
            )
        for k, bucket in enumerate(r["buckets"].get(arm, [])):
            if lo <= bucket <= hi:
                ax.axvline(
                    bucket,
                    color=color,
                    ls=":" if arm == "A" else "--",
                    alpha=0.5,
                    label=f"{arm} buckets" if k == 0 else None,
                )
    ax.set(
        xlabel="concurrency",
        ylabel="output tok/s",
        title="throughput and CUDA-graph bucket boundaries",
    )
    _legend(ax, fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, plt, directory / "buckets.png")


def _legend(ax: Axes, *, fontsize: int, ncol: int = 1) -> None:
    """A legend when something is labelled; on a partial run (one arm, no pairs yet) a panel can be
    empty, and matplotlib would warn "No artists with labels found" for it: say so in it instead."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, ncol=ncol)
    else:
        ax.text(
            0.5,
            0.5,
            "no data yet (partial run)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="grey",
        )


def _save(fig: Figure, plt: ModuleType, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
