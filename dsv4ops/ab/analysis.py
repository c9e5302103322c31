"""Per concurrency and metric: pair A and B blocks, estimate B/A with a bootstrap CI, check it with
the signed-rank test, diagnose drift, and give a verdict that never calls "no difference found"
equivalent.

Pairing. In a counterbalanced schedule (ABBA BAAB ...) blocks 2k and 2k+1 always hold one A and
one B: each such adjacent pair is a unit, and within an ABBA quad the two pairs' drift has opposite
signs, so it cancels in the mean. Any other order (the naive AAAA BBBB) pairs the k-th A with the
k-th B in time order, which is what a naive comparison does: drift then biases every pair alike.

Verdict (B relative to A, in the metric's good direction, HIGHER_IS_BETTER):
* equivalent: the whole CI lies inside 1 ± band (TOST-style: equivalence must be shown);
* better / worse: the CI excludes 1 on that side AND the signed-rank p is below 1 - confidence;
* inconclusive: anything else, and always below the pairs the signed-rank test needs.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from dsv4ops.ab.model import METRICS, BlockResult, higher_is_better
from dsv4ops.ab.stats import bootstrap_ratio_ci, min_pairs_for, spearman, wilcoxon_signed_rank

Verdict = Literal["better", "worse", "equivalent", "inconclusive"]


@dataclass(frozen=True)
class MetricVerdict:
    concurrency: int
    metric: str
    verdict: Verdict  # B relative to A
    ratio: float | None  # B/A of block means (None when not estimable)
    ci_low: float | None  # block-bootstrap CI of the ratio
    ci_high: float | None
    wilcoxon_p: float | None  # signed-rank test on the paired differences
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

    def to_record(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Analysis:
    verdicts: list[MetricVerdict]
    partial: bool
    blocks: int
    confidence: float = 0.95
    band: float = 0.02
    seed: int = 0
    min_pairs: int = 6
    notes: list[str] = field(default_factory=list)

    def for_metric(self, metric: str) -> list[MetricVerdict]:
        return sorted((v for v in self.verdicts if v.metric == metric), key=lambda v: v.concurrency)

    def to_record(self) -> dict[str, object]:
        return {"partial": self.partial, "blocks": self.blocks, "confidence": self.confidence,
                "band": self.band, "seed": self.seed, "min_pairs": self.min_pairs,
                "notes": list(self.notes), "verdicts": [v.to_record() for v in self.verdicts]}


def pair_blocks(blocks: Sequence[BlockResult]) -> tuple[list[tuple[BlockResult, BlockResult]], str]:
    """(A, B) block pairs and the pairing used ("adjacent" or "ordinal"), complete blocks only.

    Slots are by schedule index (2k, 2k+1), so a block missing from the list (a failed deploy)
    loses its own pair only and does not shift the pairing of the blocks after it."""
    by_index = {b.index: b for b in blocks}
    slots = [(by_index[i], by_index[i + 1]) for i in sorted(by_index)
             if i % 2 == 0 and i + 1 in by_index]
    if slots and all(x.arm != y.arm for x, y in slots):
        pairs = [(x, y) if x.arm == "A" else (y, x) for x, y in slots]
        return [(a, b) for a, b in pairs if a.complete and b.complete], "adjacent"
    ordered = sorted(blocks, key=lambda b: b.index)
    a_blocks = [b for b in ordered if b.arm == "A" and b.complete]
    b_blocks = [b for b in ordered if b.arm == "B" and b.complete]
    return list(zip(a_blocks, b_blocks, strict=False)), "ordinal"


def analyse(blocks: Sequence[BlockResult], *, confidence: float = 0.95, band: float = 0.02,
            resamples: int = 2000, seed: int = 0, planned: int | None = None) -> Analysis:
    """Every (concurrency, metric) the blocks measured; `planned`: the schedule's length (fewer
    blocks than planned makes the analysis partial, as does an interrupted block)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), not {confidence}")
    if not 0 < band < 1:
        raise ValueError(f"band must be in (0, 1), not {band}")
    pairs, pairing = pair_blocks(blocks)
    need = min_pairs_for(1 - confidence)
    notes = []
    incomplete = [b.index for b in blocks if not b.complete]
    if incomplete:
        notes.append(f"blocks {incomplete} were interrupted; their values are left out")
    partial = bool(incomplete) or (planned is not None and len(blocks) < planned)
    if planned is not None and len(blocks) < planned:
        notes.append(f"{len(blocks)} of {planned} planned blocks ran")
    if pairing == "ordinal":
        notes.append("the schedule is not counterbalanced: the k-th A is paired with the k-th B, "
                     "so drift over the experiment is not cancelled")
    keys = sorted({(c, m) for b in blocks if b.complete for c, ms in b.values.items() for m in ms},
                  key=lambda cm: (cm[0], METRICS.index(cm[1]) if cm[1] in METRICS else len(METRICS),
                                  cm[1]))
    verdicts = [_metric_verdict(blocks, pairs, pairing, c, m, confidence=confidence, band=band,
                                resamples=resamples, seed=seed, need=need) for c, m in keys]
    return Analysis(verdicts, partial, len(blocks), confidence, band, seed, need, notes)


def _summary(xs: list[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def _metric_verdict(blocks: Sequence[BlockResult], pairs: list[tuple[BlockResult, BlockResult]],
                    pairing: str, c: int, m: str, *, confidence: float, band: float,
                    resamples: int, seed: int, need: int) -> MetricVerdict:
    a_vals = [(b.index, v) for b in blocks if b.arm == "A" and b.complete
              and (v := b.value(c, m)) is not None]
    b_vals = [v for b in blocks if b.arm == "B" and b.complete and (v := b.value(c, m)) is not None]
    mean_a, sd_a = _summary([v for _, v in a_vals])
    mean_b, sd_b = _summary(b_vals)
    used = [(pa.value(c, m), pb.value(c, m), (pa.index + pb.index) / 2) for pa, pb in pairs]
    vals = [(a, b, t) for a, b, t in used if a is not None and b is not None and a > 0]
    n = len(vals)
    ratio = sum(b for _, b, _ in vals) / sum(a for a, _, _ in vals) if vals else None
    ci = bootstrap_ratio_ci([(a, b) for a, b, _ in vals], confidence=confidence,
                            resamples=resamples, rng=random.Random(f"ab:{seed}:{c}:{m}"))
    rel = [b / a - 1 for a, b, _ in vals]
    w = wilcoxon_signed_rank(rel)
    p = None if w is None else w[1]
    rho_a = spearman([float(i) for i, _ in a_vals], [v for _, v in a_vals])
    rho_d = spearman([t for _, _, t in vals], rel)
    verdict, note = _verdict(m, n, ratio, ci, p, confidence=confidence, band=band, need=need)
    return MetricVerdict(c, m, verdict, ratio, None if ci is None else ci[0],
                         None if ci is None else ci[1], p, rho_a, rho_d, n, note,
                         mean_a, mean_b, sd_a, sd_b, len(a_vals), len(b_vals), pairing)


def _verdict(metric: str, n: int, ratio: float | None, ci: tuple[float, float] | None,
             p: float | None, *, confidence: float, band: float, need: int) -> tuple[Verdict, str]:
    alpha = 1 - confidence
    if n < need or ratio is None or ci is None:
        return "inconclusive", (f"{n} A/B pairs; a verdict needs at least {need} "
                                f"({2 * need} blocks) for the signed-rank test to reach p ≤ {alpha:.2g}")
    lo, hi = ci
    span = f"CI [{lo:.3f}, {hi:.3f}] of B/A {ratio:.3f}"
    if 1 - band <= lo and hi <= 1 + band:
        return "equivalent", f"{span} lies inside the ±{100 * band:g}% band"
    up = lo > 1  # B's value is higher than A's, CI excluding 1
    down = hi < 1
    # p ≤ alpha, as min_pairs_for counts: the exact p is discrete, and with the fewest pairs
    # its smallest value equals alpha exactly (3 pairs at 75%: 0.25)
    if (up or down) and p is not None and p <= alpha:
        good = up == higher_is_better(metric)
        effect = f"{100 * (ratio - 1):+.1f}%"
        return ("better" if good else "worse"), f"{effect}: {span} excludes 1, signed-rank p {p:.3g}"
    if up or down:
        shown = "n/a" if p is None else f"{p:.3g}"
        return "inconclusive", f"{span} excludes 1 but the signed-rank p {shown} is above {alpha:.2g}"
    return "inconclusive", f"{span} spans 1 and the ±{100 * band:g}% band: no difference shown either way"
