from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from dsv4ops.canary.fit import (
    LevelPoint,
    find_sawtooth,
    fit_line,
    mean_ci95,
    pad_to_bucket,
    padding_waste,
)

STEP8 = tuple(range(32, 97, 8))  # the seeds' step-8 buckets 32..96
A, B = 18.0, 1.05  # the seeds' law


def _level(c: int, buckets: tuple[int, ...] = STEP8, noise: float = 5.0) -> LevelPoint:
    step = A + B * pad_to_bucket(c, buckets)
    tok_s = 1000.0 * c / step
    return LevelPoint(
        concurrency=c,
        bs=float(c),
        step_ms=step,
        output_tok_s=tok_s,
        output_tok_s_ci=(tok_s - noise, tok_s + noise),
        output_tok_s_n=5,
    )


def test_fit_recovers_the_law_exactly_and_the_ceiling() -> None:
    fit = fit_line([(bs, A + B * bs) for bs in (8, 16, 32, 64, 96)])
    assert fit.a_ms == pytest.approx(A) and fit.b_ms == pytest.approx(B)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.ceiling_tok_s == pytest.approx(1000 / 1.05)  # ≈ 952 tok/s, the seeds' ~950


def test_fit_with_noise_matches_numpy_polyfit() -> None:
    rng = random.Random(1)
    pts = [(bs, A + B * bs + rng.gauss(0, 0.5)) for bs in range(1, 100, 7)]
    fit = fit_line(pts)
    b, a = np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)
    assert (fit.a_ms, fit.b_ms) == pytest.approx((a, b))
    assert 0.99 < fit.r2 < 1.0


def test_fit_needs_two_distinct_batches() -> None:
    with pytest.raises(ValueError):
        fit_line([(8, 20.0), (8, 21.0)])


def test_padding() -> None:
    assert pad_to_bucket(57, STEP8) == 64
    assert pad_to_bucket(56, STEP8) == 56
    assert pad_to_bucket(100, STEP8) == 100
    assert pad_to_bucket(5, ()) == 5


def test_sawtooth_at_56_to_57_with_step8_buckets() -> None:
    levels = [_level(c) for c in (32, 48, 56, 57, 64, 72)]
    drops = find_sawtooth(levels, STEP8)
    assert [(d.from_bs, d.to_bs, d.bucket) for d in drops] == [(56, 57, 56)]
    # the seeds saw 726 -> 663 tok/s on the box; the law with padding gives 729 -> 669
    assert drops[0].from_tok_s == pytest.approx(729.2, abs=0.5)
    assert drops[0].to_tok_s == pytest.approx(669.0, abs=0.5)
    assert 8 < drops[0].drop_pct < 9


def test_no_sawtooth_within_one_graph_or_within_the_noise() -> None:
    """Issue 23: `sawtooth at bucket 88: 820 -> 604` between two levels that ran in one graph
    (no padding change) was noise or the batch estimate; and a drop inside the levels' CIs is
    not evidence either."""
    same_graph = [
        replace(_level(81), bs=81.0, output_tok_s=820.0, output_tok_s_ci=(810.0, 830.0)),
        replace(_level(88), bs=88.0, output_tok_s=604.0, output_tok_s_ci=(590.0, 620.0)),
    ]
    assert find_sawtooth(same_graph, STEP8) == []  # both pad to 88
    noisy = [_level(56, noise=60.0), _level(57, noise=60.0)]  # 729 -> 669: the drop's CI spans 0
    assert find_sawtooth(noisy, STEP8) == []
    unmeasured = [replace(p, output_tok_s_ci=None) for p in (_level(56), _level(57))]
    assert find_sawtooth(unmeasured, STEP8) == []
    drop = find_sawtooth([_level(56), _level(57)], STEP8)[0]
    assert drop.drop_ci is not None
    assert (drop.from_padded, drop.to_padded) == (56, 64) and drop.drop_ci[0] > 0


def test_mean_ci95_is_the_t_interval() -> None:
    ci = mean_ci95([10.0, 12.0, 14.0])  # mean 12, sd 2, t(2) = 4.303
    assert ci is not None
    lo, hi = ci
    assert (lo, hi) == pytest.approx((12 - 4.303 * 2 / 3**0.5, 12 + 4.303 * 2 / 3**0.5))
    assert mean_ci95([1.0, 2.0]) is None


def test_no_sawtooth_without_a_drop() -> None:
    levels = [_level(c, ()) for c in (32, 48, 56, 57, 64)]
    assert find_sawtooth(levels, STEP8) == []


def test_padding_waste_per_bucket() -> None:
    fit = fit_line([(bs, A + B * bs) for bs in STEP8])
    waste = {w.bucket: w for w in padding_waste(STEP8, fit, [_level(57)])}
    assert waste[64].lo == 57 and waste[64].worst_padded_slots == 7
    assert waste[64].worst_waste_pct == pytest.approx(100 * 7 * B / (A + 64 * B))
    assert waste[64].observed_padding_pct == pytest.approx(100 * 7 / 64)
    assert waste[32].worst_padded_slots == 31
