"""Time to decision of `dsv4ops ab`: the box time an A/B needs to resolve a 5% throughput effect at
the twin's noise level, and how it scales with the number of blocks.

The blocks are measured on the twin's REAL performance model in-process (dsv4ops.twin.perf,
StepVariation: seeded per-step noise, slow drift), with no servers: testing/ab.py.
B is A (step-8 buckets, 60 running) with every step 1/1.05 as long: a true +5% in tok/s. Each row
repeats the whole experiment over seeds and reports the chance that the analysis calls B "better"
(the correct verdict), the chance a no-effect B is called better (false positive), the median CI
width of B/A, and the box time: blocks x (switch + measured part), with the switch taken from the
twin's start-up model (load + capture per graph + warm-up) and from the real box's documented
order ("DSV4 weights load for minutes", docs/deploy.md: taken as 5 min here, an assumption).

Settings (stated, not measured on the box): DSV4_TWIN_STEP_NOISE_PCT = 2 (per-step sd, %),
DSV4_TWIN_STEP_DRIFT_PCT_PER_MIN = 0.1, measured part 180 s per block, and a deploy-to-deploy
variation (the twin has none) of 0, 1 and 2% per block: per-step noise averages away over a
block's thousands of steps, so what decides the box time is the minimum pairs the signed-rank test
needs (6 at 95%) and, with deploy-to-deploy variation, the pairs the CI needs.

    .venv/bin/python benchmarks/ab_time_to_decision.py [--reps 100] [--blocks 4,8,12,16,24]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dsv4ops.ab.analysis import analyse  # noqa: E402
from dsv4ops.ab.schedule import counterbalanced  # noqa: E402
from dsv4ops.profiles.buckets import resolve_buckets  # noqa: E402
from testing.ab import ArmModel, TwinBlocks, startup_s  # noqa: E402

EFFECT = 1.05
NOISE_PCT = 2.0
DRIFT_PCT_PER_MIN = 0.1
BLOCK_S = 180.0
BOX_SWITCH_S = 300.0  # assumption: "weights load for minutes" (docs/deploy.md)
RUNNING = 60


def _trial(blocks: int, effect: float, block_sd: float, seed: int, reps: int) -> tuple[float, float, float]:
    step8 = tuple(resolve_buckets("step8", tp_size=4, max_running_requests=96))
    arms = {"A": ArmModel("A", step8), "B": ArmModel("B", step8, step_scale=1 / effect)}
    better = 0
    widths = []
    for r in range(reps):
        sim = TwinBlocks(arms, concurrencies=(RUNNING,), steps=100, block_s=BLOCK_S, noise_pct=NOISE_PCT,
                         drift_pct_per_min=DRIFT_PCT_PER_MIN, seed=seed * 1000 + r, block_sd_pct=block_sd)
        (v,) = analyse(sim.run(counterbalanced(blocks)), resamples=400, seed=r).for_metric("output_tok_s")
        better += v.verdict == "better"
        if v.ci_low is not None and v.ci_high is not None:
            widths.append(v.ci_high - v.ci_low)
    return better / reps, (statistics.median(widths) if widths else float("nan")), len(widths) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--blocks", default="4,8,12,16,24")
    ap.add_argument("--block-sd", default="0,1,2", help="deploy-to-deploy sd per block, percent")
    args = ap.parse_args()
    step8 = tuple(resolve_buckets("step8", tp_size=4, max_running_requests=96))
    twin_switch = startup_s(ArmModel("A", step8))
    print(f"effect +{100 * (EFFECT - 1):.0f}% tok/s at {RUNNING} running; step noise {NOISE_PCT}%, "
          f"drift {DRIFT_PCT_PER_MIN}%/min; measured {BLOCK_S:.0f} s per block; switch: twin "
          f"{twin_switch:.0f} s (start-up model), box {BOX_SWITCH_S:.0f} s (assumed); {args.reps} reps per row")
    print(f"{'blocks':>6} {'sd%':>4} {'twin min':>8} {'box h':>6} {'P(better)':>9} {'P(false+)':>9} "
          f"{'CI width':>8} {'width/12blk':>11} {'time/12blk':>10}")
    for sd in (float(x) for x in args.block_sd.split(",")):
        rows = {}
        for n in (int(x) for x in args.blocks.split(",")):
            p_ok, width, _ = _trial(n, EFFECT, sd, 1, args.reps)
            p_fp, _, _ = _trial(n, 1.0, sd, 2, args.reps)
            rows[n] = (p_ok, p_fp, width)
        ref = rows.get(12, next(iter(rows.values())))[2]
        for n, (p_ok, p_fp, width) in rows.items():
            twin_min = n * (twin_switch + BLOCK_S) / 60
            box_h = n * (BOX_SWITCH_S + BLOCK_S) / 3600
            print(f"{n:>6} {sd:>4g} {twin_min:>8.1f} {box_h:>6.2f} {p_ok:>9.2f} {p_fp:>9.2f} "
                  f"{width:>8.4f} {width / ref:>11.2f} {n / 12:>10.2f}")


if __name__ == "__main__":
    main()
