"""The pure-Python statistics against textbook values and brute force."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv4ops.ab import stats
from dsv4ops.ab.stats import (
    bootstrap_ratio_ci,
    min_pairs_for,
    ranks,
    spearman,
    wilcoxon_signed_rank,
)

# Darwin's Zea mays data (cross- minus self-fertilised heights, eighths of an inch), the signed-rank
# example of Fisher's "Design of Experiments" and of scipy.stats.wilcoxon: W- = 24, exact p 0.04126.
DARWIN = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]


def test_darwin_zea_mays_matches_the_textbook() -> None:
    got = wilcoxon_signed_rank(DARWIN)
    assert got is not None  # 15 non-zero differences: the test applies
    w_plus, p = got
    assert (w_plus, 120 - w_plus) == (96, 24)
    assert p == pytest.approx(0.041259765625, abs=1e-12)


@pytest.mark.parametrize(
    ("diffs", "w_plus", "p"),
    [
        ([1, 2, 3, 4, 5], 15, 2 / 32),  # every sign alike: the smallest p of n = 5
        ([1, -2, 3, 4], 8, 2 * 3 / 16),  # W+ >= 8 in 3 of the 16 sign patterns
        ([2, 2, 2], 6, 2 / 8),  # ties: all ranks 2
        ([1, 1, -1], 4, 1.0),  # W+ = 4 is the median of {0, 2, 4, 6}
        ([0, 0, 3, -3], 1.5, 1.0),  # zeros dropped (Wilcoxon's rule), then tied ranks 1.5
    ],
)
def test_small_cases_computed_by_hand(diffs: list[float], w_plus: float, p: float) -> None:
    got = wilcoxon_signed_rank(diffs)
    assert got is not None and got[0] == w_plus and got[1] == pytest.approx(p, abs=1e-12)


def test_nothing_but_zeros_has_no_test() -> None:
    assert wilcoxon_signed_rank([0.0, 0.0]) is None and wilcoxon_signed_rank([]) is None


def _brute_p(diffs: Sequence[float]) -> float:
    d = [x for x in diffs if x != 0]
    r = ranks([abs(x) for x in d])
    w = sum(ri for ri, x in zip(r, d, strict=True) if x > 0)
    sums = [
        sum(ri for ri, s in zip(r, signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=len(d))
    ]
    low = sum(s <= w + 1e-9 for s in sums) / len(sums)
    high = sum(s >= w - 1e-9 for s in sums) / len(sums)
    return min(1.0, 2 * min(low, high))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=-6, max_value=6), min_size=1, max_size=10))
def test_the_exact_p_equals_enumerating_every_sign_pattern(diffs: list[int]) -> None:
    got = wilcoxon_signed_rank([float(x) for x in diffs])
    if all(x == 0 for x in diffs):
        assert got is None
    else:
        assert got is not None and got[1] == pytest.approx(_brute_p(diffs), abs=1e-12)


def test_the_normal_approximation_is_close_to_exact_where_both_apply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # noqa: ANN001
    rng = random.Random(5)
    d = [rng.gauss(0.3, 1.0) for _ in range(40)]
    exact = wilcoxon_signed_rank(d)
    monkeypatch.setattr(stats, "EXACT_MAX_N", 10)
    approx = wilcoxon_signed_rank(d)
    assert exact is not None and approx is not None and exact[0] == approx[0]
    assert approx[1] == pytest.approx(exact[1], abs=0.005)


def test_min_pairs_is_where_the_exact_test_can_first_reach_alpha() -> None:
    assert [min_pairs_for(a) for a in (0.1, 0.05, 0.01)] == [5, 6, 8]
    five, six = wilcoxon_signed_rank([1.0] * 5), wilcoxon_signed_rank([1.0] * 6)
    assert five is not None and six is not None  # no zeros: both have a test
    assert five[1] > 0.05 >= six[1]


def test_spearman_matches_the_textbook_iq_tv_example() -> None:
    iq = [106, 100, 86, 101, 99, 103, 97, 113, 112, 110]
    tv = [7, 27, 2, 50, 28, 29, 20, 12, 6, 17]
    assert spearman(iq, tv) == pytest.approx(-29 / 165, abs=1e-12)


def test_spearman_edges() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 25, 99]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) is None  # constant: no correlation to speak of
    assert spearman([1, 2], [1, 2]) is None  # too few points
    assert ranks([3, 1, 3, 2]) == [3.5, 1, 3.5, 2]


def _pairs(seed: int, n: int = 8) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [
        (a, a * 1.05 * rng.uniform(0.98, 1.02)) for a in (rng.uniform(600, 700) for _ in range(n))
    ]


def test_the_bootstrap_is_deterministic_by_seed() -> None:
    pairs = _pairs(1)
    ci = [
        bootstrap_ratio_ci(pairs, confidence=0.95, resamples=500, rng=random.Random(s))
        for s in (7, 7, 8)
    ]
    assert ci[0] == ci[1] and ci[0] != ci[2]


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=2, max_value=12))
def test_the_bootstrap_ci_brackets_the_point_estimate(seed: int, n: int) -> None:
    pairs = _pairs(seed, n)
    point = sum(b for _, b in pairs) / sum(a for a, _ in pairs)
    ci = bootstrap_ratio_ci(pairs, confidence=0.95, resamples=300, rng=random.Random(seed))
    assert ci is not None  # n >= 2 pairs: an interval exists
    lo, hi = ci
    lo_b = min(b / a for a, b in pairs)
    hi_b = max(b / a for a, b in pairs)
    assert (
        lo_b - 1e-12 <= lo <= point <= hi <= hi_b + 1e-12
    )  # a ratio of sums lies within the pairs'


def test_identical_pairs_give_a_zero_width_ci_and_one_pair_none() -> None:
    ci = bootstrap_ratio_ci(
        [(100.0, 105.0)] * 4, confidence=0.95, resamples=100, rng=random.Random(0)
    )
    assert ci is not None and math.isclose(ci[0], 1.05) and math.isclose(ci[1], 1.05)
    assert (
        bootstrap_ratio_ci([(1.0, 2.0)], confidence=0.95, resamples=100, rng=random.Random(0))
        is None
    )
