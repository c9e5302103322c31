"""Per concurrency and metric: pair A and B blocks, and give the sequential design's verdict
(dsv4ops/ab/sequential.py) with its repeated confidence interval, the signed-rank test and the drift
diagnostics beside it; a verdict never calls "no difference found" equivalent.

Pairing. In a counterbalanced schedule (ABBA BAAB ...) blocks 2k and 2k+1 always hold one A and
one B: each such adjacent pair is a unit, and within an ABBA quad the two pairs' drift has opposite
signs, so it cancels in the mean. Any other order (the naive AAAA BBBB) pairs the k-th A with the
k-th B in time order, which is what a naive comparison does: drift then biases every pair alike.

Verdict (B relative to A, in the metric's good direction, HIGHER_IS_BETTER), from the repeated
confidence interval of B/A after the pairs so far (valid at whichever look the experiment stops):
* better / worse: the interval at 1 - alpha excludes 1 on that side;
* equivalent: the interval at 1 - 2 alpha lies inside 1 ± band (TOST: one-sided alpha per side);
* inconclusive: anything else.
Multiplicity: the primary metric's alpha is split over its concurrency levels and the guard
metrics' (TTFT, ITL) over all guard checks (Bonferroni), so checking many levels and metrics at
every look cannot make a chance verdict likely; the fitted law (DIAGNOSTIC_METRICS) decides nothing.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from dsv4ops.ab.model import DIAGNOSTIC_METRICS, METRICS, BlockResult, higher_is_better
from dsv4ops.ab.sequential import pair_sd, repeated_ci, sd_used
from dsv4ops.ab.stats import spearman, wilcoxon_signed_rank

Verdict = Literal["better", "worse", "equivalent", "inconclusive"]
PRIMARY = "output_tok_s"
DEFAULT_VARIATION = 0.02  # the stated deploy-to-deploy sd per block when the operator names none
GUARD_BAND = 0.02  # a guard metric rejects B only when B is shown worse by more than this


@dataclass(frozen=True)
class MetricVerdict:
    concurrency: int
    metric: str
    verdict: Verdict  # B relative to A
    ratio: float | None  # B/A: the geometric mean over the pairs (None when not estimable)
    ci_low: float | None  # the repeated confidence interval of B/A at 1 - alpha
    ci_high: float | None
    wilcoxon_p: (
        float | None
    )  # signed-rank test on the paired differences (a check, not the verdict)
    drift_rho_a: float | None  # Spearman, block index vs A's values
    drift_rho_diff: float | None  # Spearman, pair time vs the relative differences
    pairs: int  # adjacent A/B pairs used
    note: str  # one sentence: why this verdict
    mean_a: float | None = None  # block-level summaries (complete blocks with the metric)
    mean_b: float | None = None
    sd_a: float | None = None
    sd_b: float | None = None
    blocks_a: int = 0
    blocks_b: int = 0
    pairing: str = "adjacent"  # "adjacent" (counterbalanced) or "ordinal" (k-th A with k-th B)
    alpha: float = 0.05  # this check's share of the experiment's alpha
    pair_sd: float | None = None  # sd of one pair's log B/A the interval used
    sd_raised: bool = False  # the pairs showed more variation than the stated bound

    def to_record(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Analysis:
    verdicts: list[MetricVerdict]
    partial: bool
    blocks: int
    confidence: float = 0.95
    band: float = 0.05  # the primary's equivalence band
    looks: int = 6  # the budget in pairs the design spends its alpha over
    variation: float = DEFAULT_VARIATION
    guard_band: float = GUARD_BAND
    notes: list[str] = field(default_factory=list)

    def for_metric(self, metric: str) -> list[MetricVerdict]:
        return sorted((v for v in self.verdicts if v.metric == metric), key=lambda v: v.concurrency)

    def to_record(self) -> dict[str, object]:
        return {
            "partial": self.partial,
            "blocks": self.blocks,
            "confidence": self.confidence,
            "band": self.band,
            "looks": self.looks,
            "variation": self.variation,
            "guard_band": self.guard_band,
            "design": "group-sequential, Kim-DeMets alpha t^3",
            "notes": list(self.notes),
            "verdicts": [v.to_record() for v in self.verdicts],
        }


def pair_blocks(blocks: Sequence[BlockResult]) -> tuple[list[tuple[BlockResult, BlockResult]], str]:
    """(A, B) block pairs and the pairing used ("adjacent" or "ordinal"), complete blocks only.

    Slots are by schedule index (2k, 2k+1), so a block missing from the list (a failed deploy)
    loses its own pair only and does not shift the pairing of the blocks after it."""
    by_index = {b.index: b for b in blocks}
    slots = [
        (by_index[i], by_index[i + 1]) for i in sorted(by_index) if i % 2 == 0 and i + 1 in by_index
    ]
    if slots and all(x.arm != y.arm for x, y in slots):
        pairs = [(x, y) if x.arm == "A" else (y, x) for x, y in slots]
        return [(a, b) for a, b in pairs if a.complete and b.complete], "adjacent"
    ordered = sorted(blocks, key=lambda b: b.index)
    a_blocks = [b for b in ordered if b.arm == "A" and b.complete]
    b_blocks = [b for b in ordered if b.arm == "B" and b.complete]
    return list(zip(a_blocks, b_blocks, strict=False)), "ordinal"


def analyse(
    blocks: Sequence[BlockResult],
    *,
    confidence: float = 0.95,
    band: float = 0.05,
    looks: int | None = None,
    variation: float = DEFAULT_VARIATION,
    guard_band: float = GUARD_BAND,
    planned: int | None = None,
    primary: str = PRIMARY,
) -> Analysis:
    """Every (concurrency, metric) the blocks measured. `looks`: the budget in pairs (default:
    the planned blocks' pairs, else the pairs there are); `variation`: the stated bound on the
    deploy-to-deploy sd per block (a fraction); `planned`: the schedule's length, fewer blocks
    than planned making the analysis partial (as does an interrupted block)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), not {confidence}")
    for name, x in (("band", band), ("guard_band", guard_band)):
        if not 0 < x < 1:
            raise ValueError(f"{name} must be in (0, 1), not {x}")
    if not 0 <= variation < 1:
        raise ValueError(f"variation must be in [0, 1), not {variation}")
    pairs, pairing = pair_blocks(blocks)
    budget = looks or (planned // 2 if planned else 0) or max(len(pairs), 1)
    notes = []
    incomplete = [b.index for b in blocks if not b.complete]
    if incomplete:
        notes.append(f"blocks {incomplete} were interrupted; their values are left out")
    partial = bool(incomplete) or (planned is not None and len(blocks) < planned)
    if planned is not None and len(blocks) < planned:
        notes.append(f"{len(blocks)} of {planned} planned blocks ran")
    if pairing == "ordinal":
        notes.append(
            "the schedule is not counterbalanced: the k-th A is paired with the k-th B, "
            "so drift over the experiment is not cancelled"
        )
    keys = sorted(
        {(c, m) for b in blocks if b.complete for c, ms in b.values.items() for m in ms},
        key=lambda cm: (cm[0], METRICS.index(cm[1]) if cm[1] in METRICS else len(METRICS), cm[1]),
    )
    alpha = 1 - confidence
    n_primary = sum(m == primary for _, m in keys) or 1
    n_guard = sum(m != primary and m not in DIAGNOSTIC_METRICS for _, m in keys) or 1
    verdicts = []
    for c, m in keys:
        share = (
            alpha / n_primary
            if m == primary
            else alpha
            if m in DIAGNOSTIC_METRICS
            else alpha / n_guard
        )
        verdicts.append(
            _metric_verdict(
                blocks,
                pairs,
                pairing,
                c,
                m,
                alpha=share,
                band=band if m == primary else guard_band,
                looks=budget,
                variation=variation,
                estimated=m != primary,
            )
        )
    return Analysis(
        verdicts, partial, len(blocks), confidence, band, budget, variation, guard_band, notes
    )


def _log_ratio(a: float, b: float) -> float:
    """log(B / A) of two positive finite values, never raising: the quotient (exact under a
    change of unit) where it is a positive finite float, else log B - log A, since the quotient
    can overflow to inf or underflow to 0 (issue 40); each log is within ±745."""
    r = b / a
    return math.log(r) if 0.0 < r < math.inf else math.log(b) - math.log(a)


def _summary(xs: list[float]) -> tuple[float | None, float | None]:
    """Mean and sd of finite values, never raising: the values are scaled by a power of two
    (exact) to within ±1 first, since fmean and stdev overflow on values near the float limit
    (issue 40); the result may be inf, never an exception."""
    if not xs:
        return None, None
    exp = math.frexp(max(abs(x) for x in xs))[1]
    scaled = [math.ldexp(x, -exp) for x in xs]
    mean = _unscaled(statistics.fmean(scaled), exp)
    return mean, (_unscaled(statistics.stdev(scaled), exp) if len(xs) > 1 else None)


def _unscaled(x: float, exp: int) -> float:
    try:
        return math.ldexp(x, exp)
    except OverflowError:  # beyond the float range: said as inf
        return math.copysign(math.inf, x)


class PairedFields(TypedDict):
    """The MetricVerdict fields every verdict carries, whatever it decides (_paired_values)."""

    wilcoxon_p: float | None
    drift_rho_a: float | None
    drift_rho_diff: float | None
    pairs: int
    mean_a: float | None
    mean_b: float | None
    sd_a: float | None
    sd_b: float | None
    blocks_a: int
    blocks_b: int
    pairing: str
    alpha: float


def _paired_values(
    blocks: Sequence[BlockResult],
    pairs: list[tuple[BlockResult, BlockResult]],
    pairing: str,
    c: int,
    m: str,
    *,
    alpha: float,
) -> tuple[list[tuple[float, float, float]], list[float], PairedFields]:
    """The metric at concurrency `c` over the complete A/B pairs (A, B, mid-block index), B/A - 1
    per pair, and the descriptive fields every verdict carries (means, sds, drift, Wilcoxon p)."""
    a_vals = [
        (b.index, v)
        for b in blocks
        if b.arm == "A" and b.complete and (v := b.value(c, m)) is not None
    ]
    b_vals = [v for b in blocks if b.arm == "B" and b.complete and (v := b.value(c, m)) is not None]
    mean_a, sd_a = _summary([v for _, v in a_vals])
    mean_b, sd_b = _summary(b_vals)
    used = [(pa.value(c, m), pb.value(c, m), (pa.index + pb.index) / 2) for pa, pb in pairs]
    vals = [(a, b, t) for a, b, t in used if a is not None and b is not None and a > 0 and b > 0]
    rel = [b / a - 1 for a, b, _ in vals]
    w = wilcoxon_signed_rank(rel)
    p = None if w is None else w[1]
    rho_a = spearman([float(i) for i, _ in a_vals], [v for _, v in a_vals])
    rho_d = spearman([t for _, _, t in vals], rel)
    common: PairedFields = {
        "wilcoxon_p": p,
        "drift_rho_a": rho_a,
        "drift_rho_diff": rho_d,
        "pairs": len(vals),
        "mean_a": mean_a,
        "mean_b": mean_b,
        "sd_a": sd_a,
        "sd_b": sd_b,
        "blocks_a": len(a_vals),
        "blocks_b": len(b_vals),
        "pairing": pairing,
        "alpha": alpha,
    }
    return vals, rel, common


def _metric_verdict(
    blocks: Sequence[BlockResult],
    pairs: list[tuple[BlockResult, BlockResult]],
    pairing: str,
    c: int,
    m: str,
    *,
    alpha: float,
    band: float,
    looks: int,
    variation: float,
    estimated: bool,
) -> MetricVerdict:
    vals, rel, common = _paired_values(blocks, pairs, pairing, c, m, alpha=alpha)
    n = len(vals)
    if not n:
        return MetricVerdict(
            c,
            m,
            "inconclusive",
            None,
            None,
            None,
            note="no complete A/B pair " "measured it",
            **common,
        )
    d = [_log_ratio(a, b) for a, b, _ in vals]
    sd, raised = sd_used(d, variation)
    kw = {"looks": looks, "variation": variation, "sd": sd, "estimated": estimated}
    mean, lo, hi = repeated_ci(d, alpha=alpha, **kw)  # type: ignore[arg-type]
    _, lo_e, hi_e = repeated_ci(d, alpha=min(2 * alpha, 0.5), **kw)  # type: ignore[arg-type]
    verdict, note = _verdict(
        m,
        n,
        looks,
        _ratio(mean),
        (_ratio(lo), _ratio(hi)),
        (_ratio(lo_e), _ratio(hi_e)),
        band=band,
        alpha=alpha,
    )
    shown: float | None = sd
    if estimated:  # a guard or diagnostic: its own noise, t-quantiles (sequential.repeated_ci)
        shown = max(pair_sd(variation), math.sqrt(statistics.variance(d))) if n > 1 else None
        raised = False
        if n < 2:
            note = "one A/B pair: a guard metric needs two to estimate its own noise"
    elif raised:
        note += (
            f"; the pairs vary more than the stated ±{100 * variation:g}% per block "
            f"(pair sd {100 * sd:.1f}% used)"
        )
    return MetricVerdict(
        c,
        m,
        verdict,
        _ratio(mean),
        _exp(lo),
        _exp(hi),
        note=note,
        pair_sd=shown,
        sd_raised=raised,
        **common,
    )


# A log ratio beyond this is shown as e^700 (~1e304): an interval that wide says "unbounded"
# either way, and math.exp raises OverflowError above ~709.78 (issue 40: an early look at two
# pairs of a guard metric crashed the shipped A/B).
LOG_CAP = 700.0


def _ratio(x: float) -> float:
    """exp(x) for a log ratio, capped (never raises; inf and nan pass through as exp gives them)."""
    return math.exp(max(-LOG_CAP, min(LOG_CAP, x))) if math.isfinite(x) else math.exp(x)


def _exp(x: float) -> float | None:
    return _ratio(x) if math.isfinite(x) else None


def _verdict(
    metric: str,
    n: int,
    looks: int,
    ratio: float,
    ci: tuple[float, float],
    eq: tuple[float, float],
    *,
    band: float,
    alpha: float,
) -> tuple[Verdict, str]:
    lo, hi = ci
    span = f"repeated CI [{lo:.3f}, {hi:.3f}] of B/A {ratio:.3f} after {n} of {looks} pairs"
    if lo > 1 or hi < 1:
        good = (lo > 1) == higher_is_better(metric)
        return ("better" if good else "worse"), (
            f"{100 * (ratio - 1):+.1f}%: {span} excludes 1 " f"(alpha {alpha:.2g})"
        )
    if 1 - band <= eq[0] and eq[1] <= 1 + band:
        return "equivalent", (
            f"{span}; its {1 - 2 * alpha:.3g} interval [{eq[0]:.3f}, {eq[1]:.3f}] "
            f"lies inside the ±{100 * band:g}% band"
        )
    return (
        "inconclusive",
        f"{span} spans 1 and the ±{100 * band:g}% band: no difference shown either way",
    )
