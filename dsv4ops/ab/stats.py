"""Small-sample statistics in pure Python: ranks, Spearman, the Wilcoxon signed-rank test, and a
seeded bootstrap of a ratio of means over paired units.

The default install has no numpy/scipy, and an A/B has a handful of blocks, so exactness matters
more than speed: the signed-rank p is exact (a count over all 2^n sign patterns, by dynamic
programming, ties included) up to EXACT_MAX_N pairs and a tie-corrected normal approximation above.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

EXACT_MAX_N = 50  # 2^50 sign patterns, counted (not enumerated) in O(n · Σ ranks)


def ranks(xs: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the average of the ranks they span."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None  # a constant series has no correlation to speak of
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson on average ranks); None below 3 points or for a constant series."""
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    return pearson(ranks(xs), ranks(ys))


def _signed_rank_counts(doubled_ranks: Sequence[int]) -> list[int]:
    """counts[s]: how many of the 2^n sign patterns give W+ = s/2 (ranks doubled to integers)."""
    counts = [1]
    for r in doubled_ranks:
        nxt = counts + [0] * r
        for s, c in enumerate(counts):
            if c:
                nxt[s + r] += c
        counts = nxt
    return counts


def wilcoxon_signed_rank(diffs: Sequence[float]) -> tuple[float, float] | None:
    """(W+, two-sided p) of the signed-rank test that the differences are centred on 0.

    Zero differences are dropped (Wilcoxon's own rule); None when nothing is left. Exact for
    n <= EXACT_MAX_N (with ties: the exact conditional distribution given the tied ranks),
    else the normal approximation with tie and continuity corrections.
    """
    d = [x for x in diffs if x != 0 and math.isfinite(x)]
    n = len(d)
    if n == 0:
        return None
    r = ranks([abs(x) for x in d])
    w_plus = sum(ri for ri, x in zip(r, d, strict=True) if x > 0)
    if n <= EXACT_MAX_N:
        doubled = [round(2 * ri) for ri in r]
        counts = _signed_rank_counts(doubled)
        total = 2**n
        w2 = round(2 * w_plus)
        low = sum(counts[: w2 + 1]) / total
        high = sum(counts[w2:]) / total
        return w_plus, min(1.0, 2 * min(low, high))
    mean = n * (n + 1) / 4
    ties: dict[float, int] = {}
    for ri in r:
        ties[ri] = ties.get(ri, 0) + 1
    var = n * (n + 1) * (2 * n + 1) / 24 - sum(t**3 - t for t in ties.values()) / 48
    if var <= 0:
        return w_plus, 1.0
    z = (abs(w_plus - mean) - 0.5) / math.sqrt(var)
    return w_plus, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def min_pairs_for(alpha: float) -> int:
    """The fewest pairs with which the exact two-sided signed-rank p can reach `alpha`
    (its smallest value is 2 / 2^n, every difference of one sign)."""
    n = 1
    while 2 / 2**n > alpha:
        n += 1
    return n


def bootstrap_ratio_ci(
    pairs: Sequence[tuple[float, float]], *, confidence: float, resamples: int, rng: random.Random
) -> tuple[float, float] | None:
    """Percentile CI of Σb/Σa over pairs (a, b) resampled with replacement as whole units.

    Resampling pairs, not single blocks, keeps each A block with the B block it was measured next
    to, so drift that the pairing cancels stays cancelled in every resample.
    """
    n = len(pairs)
    if n < 2 or resamples < 1:
        return None
    stats = []
    for _ in range(resamples):
        sa = sb = 0.0
        for _k in range(n):
            a, b = pairs[rng.randrange(n)]
            sa += a
            sb += b
        if sa > 0:
            stats.append(sb / sa)
    if not stats:
        return None
    stats.sort()
    tail = (1 - confidence) / 2
    return _quantile(stats, tail), _quantile(stats, 1 - tail)


def _quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (the usual type-7 definition)."""
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)
