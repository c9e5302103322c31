"""The sequential design (dsv4ops/ab/sequential.py): its boundaries spend exactly the alpha they
claim, its sizing and power, and the error rates that hold under a look after every pair, for the
primary metric and for many noisy guard metrics at once (seeded simulations, the same every run)."""

from __future__ import annotations

import math
import random

import pytest

from dsv4ops.ab.analysis import analyse
from dsv4ops.ab.decision import decide, settled
from dsv4ops.ab.model import Arm, BlockResult
from dsv4ops.ab.schedule import counterbalanced
from dsv4ops.ab.sequential import (
    boundaries,
    expected_pairs,
    pair_sd,
    power,
    repeated_ci,
    sd_used,
    size_budget,
    spent,
)


def test_one_look_is_the_fixed_sample_test_and_more_looks_spend_alpha_by_t_cubed() -> None:
    assert boundaries(1, 0.05) == pytest.approx((1.959964,), abs=1e-5)
    assert sum(spent(4, 0.05)) == pytest.approx(0.05)
    assert spent(2, 0.05)[0] == pytest.approx(0.05 / 8)
    c = boundaries(4, 0.05)
    assert c[0] == pytest.approx(3.3588, abs=1e-3)  # Phi^-1(1 - 0.05/64/2)
    assert list(c) == sorted(c, reverse=True) and 1.96 < c[-1] < 2.1  # near the fixed-sample bound


def test_the_boundaries_reject_a_true_null_with_the_spent_probability_at_each_look() -> None:
    """A seeded Monte Carlo of the Z path: the first exit at look k has probability spent[k]."""
    looks, alpha, reps = 3, 0.05, 60000
    c = boundaries(looks, alpha)
    rng = random.Random(7)
    first = [0] * looks
    for _ in range(reps):
        s = 0.0
        for k in range(1, looks + 1):
            s += rng.gauss(0, 1)
            if abs(s) / math.sqrt(k) >= c[k - 1]:
                first[k - 1] += 1
                break
    for got, want in zip(first, spent(looks, alpha), strict=True):
        assert abs(got / reps - want) < 4 * math.sqrt(want / reps) + 1e-4, (
            first,
            spent(looks, alpha),
        )


def test_power_and_the_budget_follow_the_effect_and_the_variation() -> None:
    assert power(4, 0.05, 0.0)[-1] == pytest.approx(0.025, abs=1e-3)  # one side of a true null
    assert size_budget(0.05, 0.01, 0.05) == 2 and size_budget(0.05, 0.02, 0.05) == 4
    assert size_budget(0.05, 0.03, 0.05) > 4 and size_budget(0.01, 0.05, 0.05) == 16
    pairs, p = expected_pairs(4, 0.05, 0.05, 0.02)
    assert 2 < pairs < 4 and p >= 0.9


def test_the_budget_is_sized_at_the_alpha_each_level_of_the_primary_is_judged_at() -> None:
    """ab.analysis judges the primary at each of its L levels at alpha / L (Bonferroni): the
    budget is the fewest pairs that reach 90% power at that share, not at the whole alpha."""
    drift = math.log1p(0.05) / pair_sd(0.02)
    assert size_budget(0.05, 0.02, 0.05, levels=1) == 4
    assert size_budget(0.05, 0.02, 0.05, levels=9) == 6  # baseline's nine sweep levels
    assert power(5, 0.05 / 9, drift)[-1] < 0.9 <= power(6, 0.05 / 9, drift)[-1]
    pairs, p = expected_pairs(6, 0.05, 0.05, 0.02, levels=9)
    assert p == pytest.approx(power(6, 0.05 / 9, drift)[-1]) and 4 < pairs < 6


def test_the_stated_variation_is_raised_only_when_the_pairs_clearly_vary_more() -> None:
    assert sd_used([0.05, 0.051], 0.01) == (pair_sd(0.01), False)
    sd, raised = sd_used([0.0, 0.2, -0.2, 0.1], 0.01)
    assert raised and sd > 5 * pair_sd(0.01)
    m, lo, hi = repeated_ci([0.05, 0.05], looks=2, alpha=0.05, variation=0.01)
    assert m == pytest.approx(0.05) and hi - m == pytest.approx(m - lo)
    assert (hi - lo) / 2 == pytest.approx(boundaries(2, 0.05)[1] * pair_sd(0.01) / math.sqrt(2))


def _experiment(
    rng: random.Random,
    *,
    looks: int,
    sd: float,
    effect: float = 1.0,
    guards: int = 0,
    guard_sd: float = 0.0,
) -> tuple[str, int, str]:
    """(B/A throughput verdict, pairs run, winner) of one sequential experiment on synthetic
    blocks: every block's values share one deploy offset (sd `sd`); guard metrics add their own
    noise (a p99 is noisier than a mean)."""
    blocks: list[BlockResult] = []
    an = None
    for i, arm in enumerate(counterbalanced(2 * looks)):
        offset = math.exp(rng.gauss(0, sd))
        values = {60: {"output_tok_s": 700 * offset * (effect if arm == "B" else 1.0)}}
        values[60] |= {
            f"g{j}_ms": 90 / offset * math.exp(rng.gauss(0, guard_sd)) for j in range(guards)
        }
        blocks.append(BlockResult(i, arm, arm, None, "", 1.0, values))
        if i % 2:
            an = analyse(blocks, band=0.05, looks=looks, variation=sd)
            if settled(an, []):
                break
    assert an is not None
    return an.for_metric("output_tok_s")[0].verdict, len(blocks) // 2, decide(an, []).winner


def test_a_no_effect_b_is_rarely_called_better_or_worse_despite_a_look_after_every_pair() -> None:
    rng = random.Random(11)
    runs = [_experiment(rng, looks=4, sd=0.02) for _ in range(300)]
    false = sum(v in ("better", "worse") for v, _, _ in runs) / len(runs)
    assert false <= 0.05 and sum(w == "B" for _, _, w in runs) / len(runs) <= 0.025 + 0.01
    assert sum(v == "equivalent" for v, _, _ in runs) / len(runs) >= 0.8  # and mostly decided
    # Peeking with a fixed 95% interval after every pair is what the design replaces: it errs
    # far more often on the very same kind of data.
    naive = 0
    for _ in range(300):
        d = [rng.gauss(0, pair_sd(0.02)) for _ in range(4)]
        naive += any(abs(sum(d[:k]) / k) > 1.96 * pair_sd(0.02) / math.sqrt(k) for k in range(1, 5))
    assert naive / 300 > 0.08


def test_a_true_five_percent_is_decided_better_within_the_budget() -> None:
    rng = random.Random(12)
    runs = [_experiment(rng, looks=2, sd=0.01, effect=1.05) for _ in range(200)]
    assert sum(v == "better" for v, _, _ in runs) / len(runs) >= 0.95
    assert sum(n for _, n, _ in runs) / len(runs) < 1.6  # mostly at the first look


def test_many_noisy_guards_cannot_keep_a_by_chance() -> None:
    """12 guard checks with 4% noise of their own per block and no effect: Bonferroni over the
    checks and the band keep the chance that any of them rejects B below alpha."""
    rng = random.Random(13)
    runs = [
        _experiment(rng, looks=4, sd=0.01, effect=1.05, guards=12, guard_sd=0.04)
        for _ in range(150)
    ]
    assert sum(w == "B" for _, _, w in runs) / len(runs) >= 0.9


def test_a_failed_gate_settles_the_experiment_for_a() -> None:
    from dsv4ops.ab.decision import GateResult

    blocks = [
        BlockResult(
            i, arm, arm, None, "", 1.0, {60: {"output_tok_s": 700.0 * (1.2 if arm == "B" else 1)}}
        )
        for i, arm in enumerate(counterbalanced(2))
    ]
    an = analyse(blocks, looks=4)
    gate = GateResult("abort_cascade", "B", False, "wedged")
    assert settled(an, [gate]) and decide(an, [gate]).winner == "A"
    assert not settled(analyse(blocks[:2], looks=4, variation=0.2), [])  # nothing shown yet


ARMS: tuple[Arm, ...] = ("A", "B")


def test_a_first_look_spending_below_float_resolution_still_has_a_boundary() -> None:
    """1 - a/2 rounds to 1.0 below a ~ 2e-16 (what `--blocks 100000` spent at its first look),
    whose normal quantile does not exist: the boundary comes from the lower tail instead."""
    (c,) = boundaries(1, 1e-17)
    assert 8.0 < c < 9.0 and math.isfinite(c)
