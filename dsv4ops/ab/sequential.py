"""The sequential design: a group-sequential test with alpha spending, looked at after every A/B
pair, and its repeated confidence intervals.

Why group-sequential and not a mixture SPRT. An A/B here has a handful of looks (one per pair of
blocks, each pair a box restart or two), and the budget is known up front (the plan sizes it).
A mixture SPRT / confidence sequence (Optimizely's Stats Engine; Howard et al. 2021) is valid at
every look forever, and pays for that with a wider interval at any fixed look: at 4 pairs its
95% interval is about 1.4x the fixed-sample one. A Lan-DeMets spending design (as Spotify's
platform uses) spends alpha only over the K looks the budget allows, so its last-look interval is
about 1.05x the fixed-sample one. With 4-8 blocks that difference is the difference between
deciding and not (docs/ab.md has the numbers).

The model. Each pair gives d = log(B/A) of a metric: the effect plus the two blocks' deploy-to-
deploy offsets and their within-block noise, d ~ N(effect, tau^2), tau^2 = 2 (v^2 + w^2), with
v the operator's stated bound on the deploy-to-deploy sd and w a floor for the within-block noise.
tau is not learnt from two pairs (one degree of freedom says nothing); it is the stated bound,
raised to what the data show once they clearly show more (a one-sided lower confidence limit of
the pairs' variance above the bound). After n pairs the repeated confidence interval is
mean(d) ± c_n tau / sqrt(n), where c_n are the design's boundaries: the Kim-DeMets power spending
function alpha t^3 (close to O'Brien-Fleming: little alpha spent at the first looks, almost the
fixed-sample bound at the last), computed exactly by recursive numerical integration
(Armitage-McPherson-Rowe) for the two-sided test. The intervals of all looks hold the true
effect together with probability 1 - alpha, so a verdict read from any of them, at whichever
look the experiment stops, is wrong with probability at most alpha.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

SPENDING_POWER = 3.0  # Kim-DeMets alpha(t) = alpha * t^rho
WITHIN_BLOCK_FLOOR = 0.003  # sd of a block's own noise, log scale: a floor, not an estimate
VARIANCE_CHECK_Q = 0.9  # the data override the stated bound when their 90% lower limit exceeds it
_N = NormalDist()
_GRID = 60  # Simpson panels over a look's continuation region
_SMALLEST = 1e-300  # a probability the normal quantile still takes (0 has no quantile)


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def spent(looks: int, alpha: float) -> list[float]:
    """Alpha spent at each of `looks` equally spaced looks (sums to alpha)."""
    cum = [alpha * (k / looks) ** SPENDING_POWER for k in range(looks + 1)]
    return [cum[k] - cum[k - 1] for k in range(1, looks + 1)]


def _simpson(lo: float, hi: float) -> tuple[list[float], list[float]]:
    n = 2 * _GRID
    h = (hi - lo) / n
    xs = [lo + i * h for i in range(n + 1)]
    ws = [h / 3 * (1 if i in (0, n) else 4 if i % 2 else 2) for i in range(n + 1)]
    return xs, ws


def _exit(
    density: list[tuple[float, float]], bound: float, drift: float, upper_only: bool
) -> float:
    """P(S_k outside ±bound) over the weighted continuation density of S_{k-1} (one N(drift, 1) step)."""
    total = 0.0
    for u, wf in density:
        p = _cdf(u + drift - bound)
        if not upper_only:
            p += _cdf(-bound - u - drift)
        total += wf * p
    return total


def _advance(
    density: list[tuple[float, float]], bound: float, drift: float
) -> list[tuple[float, float]]:
    xs, ws = _simpson(-bound, bound)
    return [
        (s, w * sum(wf * _phi(s - u - drift) for u, wf in density))
        for s, w in zip(xs, ws, strict=True)
    ]


@lru_cache(maxsize=256)
def boundaries(looks: int, alpha: float) -> tuple[float, ...]:
    """The two-sided z boundaries c_1..c_K of the spending design (|Z_k| >= c_k rejects)."""
    if looks < 1 or not 0 < alpha < 1:
        raise ValueError(f"looks must be >= 1 and alpha in (0, 1), not {looks}, {alpha}")
    out: list[float] = []
    density: list[tuple[float, float]] = []
    for k, a_k in enumerate(spent(looks, alpha), start=1):
        if k == 1:
            # The lower tail, negated: 1 - a_k/2 rounds to 1.0 for a tiny a_k (many looks), and
            # the quantile of 1 does not exist; a_k/2 itself stays exact down to ~1e-308.
            c = -_N.inv_cdf(max(a_k / 2, _SMALLEST))
        else:
            lo, hi = 0.0, 12.0
            for _ in range(60):  # exit probability falls as the bound rises
                mid = (lo + hi) / 2
                if _exit(density, mid * math.sqrt(k), 0.0, False) > a_k:
                    lo = mid
                else:
                    hi = mid
            c = hi
        out.append(c)
        density = (
            _advance(density, c * math.sqrt(k), 0.0)
            if k > 1
            else [(s, w * _phi(s)) for s, w in zip(*_simpson(-c, c), strict=True)]
        )
    return tuple(out)


def power(looks: int, alpha: float, drift: float) -> list[float]:
    """P(the upper boundary is crossed by look k), k = 1..K, when each pair's d has mean
    drift * tau (drift: the effect in units of one pair's sd)."""
    cs = boundaries(looks, alpha)
    out, acc = [], 0.0
    density: list[tuple[float, float]] = []
    for k, c in enumerate(cs, start=1):
        b = c * math.sqrt(k)
        if k == 1:
            acc += _cdf(drift - c)
            density = [(s, w * _phi(s - drift)) for s, w in zip(*_simpson(-b, b), strict=True)]
        else:
            acc += _exit(density, b, drift, True)
            density = _advance(density, b, drift)
        out.append(acc)
    return out


def pair_sd(variation: float) -> float:
    """The stated sd of one pair's log-ratio: two blocks, each with its deploy offset and noise."""
    return math.sqrt(2 * (variation**2 + WITHIN_BLOCK_FLOOR**2))


def _chi2_quantile(q: float, df: int) -> float:
    """Wilson-Hilferty: within 2% of the exact quantile from one degree of freedom up."""
    z = _N.inv_cdf(q)
    return df * max(1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df)), 1e-6) ** 3


def sd_used(diffs: list[float], variation: float) -> tuple[float, bool]:
    """(the pair sd the interval uses, whether the data raised it above the stated bound)."""
    stated = pair_sd(variation)
    n = len(diffs)
    if n < 2:
        return stated, False
    m = sum(diffs) / n
    s2 = sum((d - m) ** 2 for d in diffs) / (n - 1)
    lower = s2 * (n - 1) / _chi2_quantile(VARIANCE_CHECK_Q, n - 1)
    if lower > stated**2:
        return math.sqrt(lower), True
    return stated, False


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df (Abramowitz & Stegun 26.7.3-4, finite sums)."""
    th = math.atan(t / math.sqrt(df))
    c2 = math.cos(th) ** 2
    if df % 2:
        term, acc = 1.0, 1.0 if df > 1 else 0.0
        for k in range(3, df - 1, 2):  # 1 + 2/3 c^2 + 2·4/(3·5) c^4 + ...
            term *= (k - 1) / k * c2
            acc += term
        return 2 / math.pi * (th + (math.sin(th) * math.cos(th) * acc if df > 1 else 0.0))
    term = acc = 1.0
    for k in range(2, df - 1, 2):  # 1 + 1/2 c^2 + 1·3/(2·4) c^4 + ...
        term *= (k - 1) / k * c2
        acc += term
    return math.sin(th) * acc


def t_quantile(tail: float, df: int) -> float:
    """The t with P(|T| > t) = tail (two-sided), by bisection."""
    lo, hi = 0.0, 1.0
    while 1 - _t_two_sided(hi, df) > tail:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if 1 - _t_two_sided(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    return hi


def repeated_ci(
    diffs: list[float],
    *,
    looks: int,
    alpha: float,
    variation: float,
    sd: float | None = None,
    estimated: bool = False,
) -> tuple[float, float, float]:
    """(mean, low, high) of the effect on the log scale after len(diffs) of `looks` pairs.
    Past the budget the last boundary is used (the design had no more alpha to spend).

    estimated: the metric's own noise is not bounded by the stated variation (a p99 has its
    tail's noise on top): the sd is the larger of the stated one and the pairs' own, and the
    boundary is the t quantile (n - 1 degrees of freedom) at the boundary's tail probability;
    with one pair the interval is unbounded (nothing can be shown yet)."""
    n = len(diffs)
    if n < 1:
        raise ValueError("no pairs")
    cs = boundaries(looks, alpha)
    c = cs[min(n, looks) - 1]
    m = sum(diffs) / n
    if estimated:
        if n < 2:
            return m, -math.inf, math.inf
        s = math.sqrt(sum((d - m) ** 2 for d in diffs) / (n - 1))
        tau = max(s, pair_sd(variation))
        c = t_quantile(2 * (1 - _cdf(c)), n - 1)
    else:
        tau = sd if sd is not None else sd_used(diffs, variation)[0]
    r = c * tau / math.sqrt(n)
    return m, m - r, m + r


TARGET_POWER = (
    0.9  # the plan sizes the budget so a true effect of the named size is decided by then
)
MAX_LOOKS = 16  # 32 blocks: beyond that the named effect is too small for this box's variation


def size_budget(
    effect: float,
    variation: float,
    alpha: float,
    *,
    levels: int = 1,
    max_looks: int = MAX_LOOKS,
) -> int:
    """The fewest pairs (at least 2) with which a true effect of `effect` (a fraction, +0.05 for
    5%) is decided better with probability TARGET_POWER at each of the primary metric's
    `levels`, at the stated variation; max_looks when even that many do not reach it. Each
    level is judged at alpha / levels (ab.analysis splits the primary's alpha so: Bonferroni),
    and the budget is sized at that share."""
    drift = math.log1p(abs(effect)) / pair_sd(variation)
    share = alpha / max(levels, 1)
    for looks in range(2, max_looks + 1):
        if power(looks, share, drift)[-1] >= TARGET_POWER:
            return looks
    return max_looks


def expected_pairs(
    looks: int, alpha: float, effect: float, variation: float, *, levels: int = 1
) -> tuple[float, float]:
    """(expected pairs until a true `effect` is decided, or the budget ends; P(decided by then))
    at one level judged at alpha / levels, as size_budget sizes it."""
    share = alpha / max(levels, 1)
    curve = power(looks, share, math.log1p(abs(effect)) / pair_sd(variation))
    return 1 + sum(1 - p for p in curve[:-1]), curve[-1]
