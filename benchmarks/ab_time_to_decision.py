"""Time to decision of `dsv4ops ab`: the sequential design (a look after every A/B pair, stop when
decided) against today's fixed design (12 blocks, bootstrap CI and signed-rank test), on the
twin's REAL performance model in-process (dsv4ops.twin.perf via testing/ab.py: seeded per-step
noise, slow drift, a per-deploy offset), with no servers.

B is A (step-8 buckets, 60 running) with every step 1/(1 + effect) as long. Each row repeats the
whole experiment over seeds and reports P(correct), P(false better/worse), P(undecided), the mean
and worst blocks and box-hours: blocks x (switch + measured part), the switch taken as 5 min on
the box ("DSV4 weights load for minutes", docs/deploy.md: an assumption).

Settings (stated, not measured on the box): DSV4_TWIN_STEP_NOISE_PCT = 2, drift 0.1%/min,
180 s measured per block, deploy-to-deploy variation (true) of 0, 1 and 2% per block; the
design's stated variation (`--variation`) is the true one, then the default 2% at the lower
truths and an understated 1% at 2% (what happens when the operator is wrong). Effects: +5% (the
named effect: correct is better), 0 (correct is equivalent within the ±5% band) and +2% (inside
the band: equivalent or better are both correct).

    .venv/bin/python benchmarks/ab_time_to_decision.py [--reps 200]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsv4ops.ab.analysis import analyse  # noqa: E402
from dsv4ops.ab.decision import settled  # noqa: E402
from dsv4ops.ab.schedule import counterbalanced  # noqa: E402
from dsv4ops.ab.sequential import size_budget  # noqa: E402
from dsv4ops.ab.stats import bootstrap_ratio_ci, min_pairs_for, wilcoxon_signed_rank  # noqa: E402
from dsv4ops.profiles.buckets import resolve_buckets  # noqa: E402
from testing.ab import ArmModel, TwinBlocks  # noqa: E402

EFFECT = 0.05  # the named effect (--effect 5) and the equivalence band
INSIDE = 0.02
NOISE_PCT = 2.0
DRIFT_PCT_PER_MIN = 0.1
BLOCK_S = 180.0
BOX_SWITCH_S = 300.0  # assumption: "weights load for minutes" (docs/deploy.md)
RUNNING = 60
ROWS = ((0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (1.0, 2.0), (2.0, 1.0))  # (true, stated) %


def _sim(effect: float, true_sd: float, seed: int) -> TwinBlocks:
    step8 = tuple(resolve_buckets("step8", tp_size=4, max_running_requests=96))
    arms: dict[Literal["A", "B"], ArmModel] = {
        "A": ArmModel("A", step8),
        "B": ArmModel("B", step8, step_scale=1 / (1 + effect)),
    }
    return TwinBlocks(
        arms,
        concurrencies=(RUNNING,),
        steps=100,
        block_s=BLOCK_S,
        noise_pct=NOISE_PCT,
        drift_pct_per_min=DRIFT_PCT_PER_MIN,
        seed=seed,
        block_sd_pct=true_sd,
    )


def sequential(effect: float, true_sd: float, stated: float, seed: int) -> tuple[str, int]:
    """(verdict, blocks run) of one sequential experiment."""
    looks = size_budget(EFFECT, stated / 100, 0.05)
    blocks = _sim(effect, true_sd, seed).run(counterbalanced(2 * looks))
    for k in range(1, looks + 1):
        an = analyse(blocks[: 2 * k], band=EFFECT, looks=looks, variation=stated / 100)
        if settled(an, []) or k == looks:
            return an.for_metric("output_tok_s")[0].verdict, 2 * k
    raise AssertionError("unreachable")


def fixed12(effect: float, true_sd: float, seed: int) -> tuple[str, int]:
    """Today's design: 12 blocks, a percentile bootstrap CI of B/A and the signed-rank test, a
    ±2% equivalence band (as it shipped)."""
    blocks = _sim(effect, true_sd, seed).run(counterbalanced(12))
    pairs = [
        (a.value(RUNNING, "output_tok_s"), b.value(RUNNING, "output_tok_s"))
        for a, b in zip(blocks[0::2], blocks[1::2], strict=True)
    ]
    ab = [(a, b) if x.arm == "A" else (b, a) for (a, b), x in zip(pairs, blocks[0::2], strict=True)]
    ci = bootstrap_ratio_ci(ab, confidence=0.95, resamples=400, rng=random.Random(seed))  # type: ignore[arg-type]
    w = wilcoxon_signed_rank([b / a - 1 for a, b in ab])  # type: ignore[operator]
    assert ci is not None and w is not None and len(ab) >= min_pairs_for(0.05)
    if ci[0] >= 0.98 and ci[1] <= 1.02:
        return "equivalent", 12
    if (ci[0] > 1 or ci[1] < 1) and w[1] <= 0.05:
        return ("better" if ci[0] > 1 else "worse"), 12
    return "inconclusive", 12


def _row(name: str, run: Callable[..., tuple[str, int]], effect: float, reps: int) -> str:
    got = [run(effect, r) for r in range(reps)]
    right = {EFFECT: {"better"}, 0.0: {"equivalent"}, INSIDE: {"better", "equivalent"}}[effect]
    wrong = {"better", "worse"} - right
    p_ok = sum(v in right for v, _ in got) / reps
    p_bad = sum(v in wrong for v, _ in got) / reps
    p_none = sum(v == "inconclusive" for v, _ in got) / reps
    n = [b for _, b in got]
    mean = sum(n) / reps
    hours = (BOX_SWITCH_S + BLOCK_S) / 3600
    return (
        f"| {name} | {100 * effect:+.0f}% | {p_ok:.3f} | {p_bad:.3f} | {p_none:.3f} | {mean:.1f} | "
        f"{max(n)} | {mean * hours:.2f} | {max(n) * hours:.2f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    print(
        f"named effect +{100 * EFFECT:.0f}% tok/s at {RUNNING} running (band ±{100 * EFFECT:.0f}%); "
        f"step noise {NOISE_PCT}%, drift {DRIFT_PCT_PER_MIN}%/min; {BLOCK_S:.0f} s measured per "
        f"block, box switch {BOX_SWITCH_S:.0f} s (assumed); {args.reps} seeded reps per row\n"
    )
    print(
        "| design (true / stated variation) | effect | P(correct) | P(false better/worse) | "
        "P(undecided) | mean blocks | worst blocks | mean box-h | worst box-h |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for true_sd, stated in ROWS:
        budget = 2 * size_budget(EFFECT, stated / 100, 0.05)
        for effect in (EFFECT, 0.0, INSIDE):
            name = f"sequential {true_sd:g}% / {stated:g}% (budget {budget})"
            print(
                _row(
                    name,
                    lambda e, r, t=true_sd, s=stated: sequential(e, t, s, 1000 + r),
                    effect,
                    args.reps,
                ),
                flush=True,
            )
    for true_sd in (0.0, 1.0, 2.0):
        for effect in (EFFECT, 0.0, INSIDE):
            print(
                _row(
                    f"today: fixed 12, {true_sd:g}%",
                    lambda e, r, t=true_sd: fixed12(e, t, 1000 + r),
                    effect,
                    args.reps,
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
