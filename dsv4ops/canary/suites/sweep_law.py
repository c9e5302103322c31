"""The sweep's step law: fitted through the levels (against the batch, the padded batch and the
server's own step accounting), and what it finds: how well it fits, sawtooth drops at the captured
buckets, and the levels off it. sweep.py runs the staircase and measures the levels.
"""

from __future__ import annotations

import contextlib
import math

from dsv4ops.canary.fit import (
    LevelPoint,
    StepFit,
    find_sawtooth,
    fit_line,
    pad_to_bucket,
    padding_waste,
)
from dsv4ops.canary.suites.common import SuiteContext
from dsv4ops.canary.verdict import Findings, Kind
from dsv4ops.constants import MIN_SWEEP_LAW_LEVELS
from dsv4ops.jsontypes import JSONObject


def judge_against_law(
    f: Findings,
    metrics: JSONObject,
    law: StepFit,
    judged: list[LevelPoint],
    ctx: SuiteContext,
    clock: str,
) -> None:
    """The fitted step law's findings: how well it fits, the sawtooth drops at the captured
    buckets (with the padding they waste), and the levels off the law."""
    th = ctx.thresholds
    f.note(
        f"step = {law.a_ms:.2f} + {law.b_ms:.3f}*{law.x} ms (R² {law.r2:.3f}, from "
        f"{metrics['law_source']}); ceiling 1000/b = {law.ceiling_tok_s:.0f} tok/s ({clock})"
    )
    if law.r2 < th.sweep_min_r2:
        f.unsure(f"step law fits poorly: R² {law.r2:.3f} < {th.sweep_min_r2}", Kind.POOR_FIT)
    if ctx.buckets:
        drops = find_sawtooth(judged, ctx.buckets)
        metrics["sawtooth"] = [{**d.__dict__, "drop_pct": d.drop_pct} for d in drops]
        metrics["padding_waste"] = [w.__dict__ for w in padding_waste(ctx.buckets, law, judged)]
        for d in drops:
            ci = (
                f"drop 95% CI {_ci(d.drop_ci)} tok/s; levels [{_ci(d.from_ci)}] -> [{_ci(d.to_ci)}]"
            )
            line = (
                f"sawtooth at bucket {d.bucket}: {d.from_tok_s:.0f} -> {d.to_tok_s:.0f} tok/s "
                f"({d.from_bs:.0f} -> {d.to_bs:.0f} running, padded {d.from_padded:.0f} -> "
                f"{d.to_padded:.0f}; -{d.drop_pct:.1f}%, beyond the noise: {ci})"
            )
            f.note(
                line
                + (
                    " exceeds sawtooth_max_drop_pct"
                    if d.drop_pct > th.sawtooth_max_drop_pct
                    else ""
                )
            )
    off, unusable = off_law(judged, law, ctx.buckets, th.sweep_throughput_tolerance_pct)
    if unusable:
        f.unsure(
            "the fitted step law predicts no positive step time at "
            + ", ".join(unusable)
            + ": those levels cannot be judged against it",
            Kind.OFF_LAW,
        )
    if off:
        f.note("levels off the law by more than the tolerance: " + ", ".join(off))


# A line through two levels fits them exactly: a law needs a third level to be tested by
# (constants.py), and a step that grows with the batch (b > 0) to be a step law at all.
MIN_LAW_LEVELS = MIN_SWEEP_LAW_LEVELS


def law_problem(fit: StepFit) -> str | None:
    """Why a fit is not a step law (None when it is one)."""
    if fit.levels < MIN_LAW_LEVELS:
        return (
            f"{fit.levels} usable level(s) against {fit.x}, at least {MIN_LAW_LEVELS} needed "
            "(a line through two levels fits them by construction)"
        )
    if not fit.b_ms > 0:
        return (
            f"slope {fit.b_ms:.3f} ms/request against {fit.x}: the step time does not grow "
            "with the batch, so no step law (and no 1000/b ceiling) follows"
        )
    return None


def lawful(fits: dict[str, StepFit]) -> tuple[dict[str, StepFit], dict[str, str]]:
    """The fits that are step laws, and why each other one is not."""
    problems = {k: why for k, v in fits.items() if (why := law_problem(v)) is not None}
    return {k: v for k, v in fits.items() if k not in problems}, problems


def primary_law(
    fits: dict[str, StepFit], points: list[LevelPoint]
) -> tuple[StepFit | None, bool, dict[str, str]]:
    """(the sweep's law, whether it is the server's own, why a metrics law is not the sweep's).

    The server's own accounting is the primary law when exposed: it is not distorted by client
    lag or by proxies coalescing chunks (the twin reports it in model time). Only when it has
    every level the sweep measured: a metrics law through the levels that had a whole-interval
    report, judged as the law, passed a real CPU sweep whose fourth level (16 running, no whole
    40-step report in its window) it missed by 2x (issue 38: 49 + 5.1*bs, R² 0.989 from 1, 4
    and 8; the client's step at 16: 294 ms, the law's 131); the token law goes through them all.
    """
    server_side = "metrics" in fits and all(p.output_tok_s_metrics for p in points)
    law = (fits["metrics"] if server_side else None) or fits.get("padded_bs") or fits.get("bs")
    metrics_law = fits.get("metrics")
    if server_side or metrics_law is None:
        return law, server_side, {}
    missing = ", ".join(f"c{p.concurrency}" for p in points if not p.output_tok_s_metrics)
    why = (
        f"no whole-interval decode report at {missing}: a law through the other "
        f"{metrics_law.n} level(s) is not this sweep's"
    )
    return law, False, {"metrics": why}


def fit_laws(points: list[LevelPoint], buckets: tuple[int, ...]) -> dict[str, StepFit]:
    """Every fit the levels allow (lawful() says which of them are laws)."""
    fits: dict[str, StepFit] = {}
    for name, xs in (
        ("bs", [p.bs for p in points]),
        ("padded_bs", [pad_to_bucket(p.bs, buckets) for p in points] if buckets else None),
    ):
        if xs is None:
            continue
        with contextlib.suppress(ValueError):
            fits[name] = fit_line(list(zip(xs, [p.step_ms for p in points], strict=True)), x=name)
    with_metrics = [(p.bs, p.step_ms_metrics) for p in points if p.step_ms_metrics]
    try:
        xs = [pad_to_bucket(bs, buckets) for bs, _ in with_metrics]
        fits["metrics"] = fit_line(
            list(zip(xs, [step for _, step in with_metrics], strict=True)),
            x="padded_bs" if buckets else "bs",
        )
    except ValueError:
        pass
    return fits


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"{ci[0]:.0f}-{ci[1]:.0f}"


def off_law(
    points: list[LevelPoint], law: StepFit, buckets: tuple[int, ...], tol_pct: float
) -> tuple[list[str], list[str]]:
    """(levels whose step time is off the law at their (padded) batch beyond the tolerance,
    levels where the law predicts a step <= 0 ms). The step, not tok/s: the law is a step law,
    and tok/s also carries the running-batch estimate (a median of a gauge), which made a level
    whose ITL equals the law look off it. A fit through few or coarse levels can cross zero
    (a = -b*bs): no step follows from it, so such a level is reported, never divided by."""
    off, unusable = [], []
    for p in points:
        x = pad_to_bucket(p.bs, buckets) if law.x == "padded_bs" else p.bs
        predicted = law.step_ms(x)
        if not (math.isfinite(predicted) and predicted > 0):
            unusable.append(f"c{p.concurrency} ({predicted:.2f} ms at bs {p.bs:g})")
            continue
        if p.step_ms > 0 and abs(p.step_ms - predicted) / predicted * 100 > tol_pct:
            off.append(
                f"c{p.concurrency} step {p.step_ms:.1f} vs {predicted:.1f} ms at batch {x:.0f}"
            )
    return off, unusable
