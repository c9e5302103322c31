"""Sweep analysis: the decode step-time law, the CUDA-graph bucket sawtooth and padding waste.

The seeds' law is `step ≈ a + b·bs` (18 ms + 1.05 ms/req on the box; asymptote 1000/b ≈ 950 tok/s).
A decode step at running batch `bs` replays the smallest captured graph ≥ bs, so with buckets the
GPU runs the *padded* batch: throughput drops when bs crosses a bucket (726 → 663 tok/s at 56 → 57
with step-8 buckets). Fitting against the padded batch recovers a and b exactly; the fit against
the raw batch is reported too.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class StepFit:
    a_ms: float
    b_ms: float
    r2: float
    n: int
    x: str  # "padded_bs" or "bs"
    levels: int = 0  # distinct x values the line went through

    @property
    def ceiling_tok_s(self) -> float:
        """Asymptotic decode throughput 1000/b tok/s (every slot busy, fixed cost amortised)."""
        return 1000.0 / self.b_ms if self.b_ms > 0 else float("inf")

    def step_ms(self, bs: float) -> float:
        return self.a_ms + self.b_ms * bs

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "ceiling_tok_s": self.ceiling_tok_s}


def fit_line(points: Sequence[tuple[float, float]], *, x: str = "bs") -> StepFit:
    """Least squares y = a + b·x. Raises ValueError with fewer than two distinct x values."""
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        raise ValueError("need at least two distinct batch sizes to fit step = a + b*bs")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((v - mx) ** 2 for v in xs)
    sxy = sum((u - mx) * (v - my) for u, v in zip(xs, ys, strict=True))
    b = sxy / sxx
    a = my - b * mx
    ss_tot = sum((v - my) ** 2 for v in ys)
    ss_res = sum((v - (a + b * u)) ** 2 for u, v in zip(xs, ys, strict=True))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return StepFit(a_ms=a, b_ms=b, r2=r2, n=n, x=x, levels=len(set(xs)))


def pad_to_bucket(bs: float, buckets: Sequence[int]) -> float:
    """The captured graph size a batch of `bs` runs in (bs itself above the largest bucket)."""
    if not buckets:
        return bs
    ordered = sorted(buckets)
    i = bisect.bisect_left(ordered, bs)
    return float(ordered[i]) if i < len(ordered) else bs


@dataclass(frozen=True)
class LevelPoint:
    """One staircase level: requested concurrency, observed running batch, step time, throughput."""

    concurrency: int
    bs: float
    step_ms: float
    output_tok_s: float
    step_ms_metrics: float | None = None
    output_tok_s_metrics: float | None = None  # the server's gen_throughput over the window
    # Client latencies at this level (ms): TTFT of the requests sent in its window, ITL of the
    # token gaps inside it (the A/B compares arms per level; the run's summary mixes levels).
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    # 95% CI of output_tok_s from the level's own slices (its measured noise), [low, high];
    # None when too few slices were measured to say.
    output_tok_s_ci: tuple[float, float] | None = None
    output_tok_s_n: int = 0  # how many slices the CI is from


@dataclass(frozen=True)
class SawtoothDrop:
    from_bs: float
    to_bs: float
    bucket: int  # the bucket boundary crossed (from_bs ≤ bucket < to_bs)
    from_tok_s: float
    to_tok_s: float
    from_padded: float = 0.0  # the graph each level's batch runs in
    to_padded: float = 0.0
    from_ci: tuple[float, float] | None = None  # 95% CIs of the two levels' tok/s
    to_ci: tuple[float, float] | None = None
    drop_ci: tuple[float, float] | None = None  # 95% CI of from_tok_s - to_tok_s (Welch)

    @property
    def drop_pct(self) -> float:
        return (
            100.0 * (self.from_tok_s - self.to_tok_s) / self.from_tok_s if self.from_tok_s else 0.0
        )


def find_sawtooth(
    levels: Sequence[LevelPoint], buckets: Sequence[int], *, min_drop_pct: float = 1.0
) -> list[SawtoothDrop]:
    """Adjacent levels whose padded batch changes (a bucket boundary crossed: the larger graph
    runs) while throughput falls by more than the measured noise: the 95% CI of the drop (Welch,
    from the two levels' slice CIs) lies above zero. Two levels in one graph are never a sawtooth (their step is the
    same by the law: a difference between them is noise or a batch estimate, not padding), and a
    level with no CI (too few slices) is no evidence of one."""
    drops: list[SawtoothDrop] = []
    ordered = sorted(levels, key=lambda p: p.bs)
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        pad_prev, pad_cur = pad_to_bucket(prev.bs, buckets), pad_to_bucket(cur.bs, buckets)
        crossed = [b for b in sorted(buckets) if prev.bs <= b < cur.bs]
        if not crossed or pad_prev == pad_cur:
            continue
        diff = _difference_ci(prev, cur)
        if diff is None or diff[0] <= 0:
            continue  # unmeasured, or within the noise
        drop = SawtoothDrop(
            prev.bs,
            cur.bs,
            crossed[-1],
            prev.output_tok_s,
            cur.output_tok_s,
            pad_prev,
            pad_cur,
            prev.output_tok_s_ci,
            cur.output_tok_s_ci,
            diff,
        )
        if drop.drop_pct >= min_drop_pct:
            drops.append(drop)
    return drops


# Two-sided 95% Student t quantiles by degrees of freedom (a level has a handful of slices).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def _t95(df: int) -> float:
    return _T95[max(k for k in _T95 if k <= max(1, df))]


def _difference_ci(a: LevelPoint, b: LevelPoint) -> tuple[float, float] | None:
    """95% CI of a.output_tok_s - b.output_tok_s from the levels' CIs (each mean ± t·se):
    se of the difference sqrt(se_a² + se_b²), t at the smaller level's degrees of freedom
    (conservative beside Welch-Satterthwaite)."""
    ci_a, ci_b = a.output_tok_s_ci, b.output_tok_s_ci
    if ci_a is None or ci_b is None or min(a.output_tok_s_n, b.output_tok_s_n) < 3:
        return None
    se = [(ci[1] - ci[0]) / 2 / _t95(p.output_tok_s_n - 1) for p, ci in ((a, ci_a), (b, ci_b))]
    half = _t95(min(a.output_tok_s_n, b.output_tok_s_n) - 1) * (se[0] ** 2 + se[1] ** 2) ** 0.5
    diff = a.output_tok_s - b.output_tok_s
    return (diff - half, diff + half)


def mean_ci95(values: Sequence[float]) -> tuple[float, float] | None:
    """95% CI of the mean of `values` (t interval; slices of one level are close to normal and
    few); None with fewer than 3 values."""
    n = len(values)
    if n < 3:
        return None
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    half = _t95(n - 1) * sd / n**0.5
    return (mean - half, mean + half)


@dataclass(frozen=True)
class BucketWaste:
    bucket: int
    lo: int  # smallest batch that runs in this bucket
    worst_padded_slots: int
    worst_waste_pct: float  # padded share of the step at bs = lo, by the fitted law
    observed_padding_pct: float | None  # mean padded share over the levels seen in this bucket


def padding_waste(
    buckets: Sequence[int], fit: StepFit, levels: Sequence[LevelPoint] = ()
) -> list[BucketWaste]:
    """Per bucket: how many slots the smallest batch that lands in it pads, and what that costs."""
    out: list[BucketWaste] = []
    prev = 0
    for b in sorted(buckets):
        lo = prev + 1
        worst = fit.step_ms(b) - fit.step_ms(lo)
        seen = [1.0 - p.bs / b for p in levels if lo <= round(p.bs) <= b]
        out.append(
            BucketWaste(
                bucket=b,
                lo=lo,
                worst_padded_slots=b - lo,
                worst_waste_pct=100.0 * worst / fit.step_ms(b) if fit.step_ms(b) > 0 else 0.0,
                observed_padding_pct=100.0 * sum(seen) / len(seen) if seen else None,
            )
        )
        prev = b
    return out
