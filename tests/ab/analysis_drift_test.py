"""Drift on the twin's REAL performance model (dsv4ops.twin.perf, StepVariation), in-process on a
fake clock: counterbalanced ABBA recovers the true effect of overlap-on inside its CI where the
naive AAAA-BBBB order, measuring the same box with the same drift, does not."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dsv4ops.ab.analysis import MetricVerdict, analyse
from dsv4ops.ab.model import Arm
from dsv4ops.ab.schedule import counterbalanced, naive
from dsv4ops.profiles.buckets import resolve_buckets
from dsv4ops.twin.config import TwinConfig
from dsv4ops.twin.perf import step_ms
from testing.ab import ArmModel, TwinBlocks

STEP8 = tuple(resolve_buckets("step8", tp_size=4, max_running_requests=96))
ARMS: dict[Arm, ArmModel] = {
    "A": ArmModel("safe", STEP8),
    "B": ArmModel("overlap-on", STEP8, overlap=True),
}


def _truth(running: int) -> float:
    """B/A throughput the twin's law gives without noise or drift (about +6% at 60 running)."""
    cfg = TwinConfig()
    off = step_ms(running, list(STEP8), a=cfg.step_a_ms, b=cfg.step_b_ms, hidden_ms=0.0)
    on = step_ms(
        running, list(STEP8), a=cfg.step_a_ms, b=cfg.step_b_ms, hidden_ms=cfg.overlap_hidden_ms
    )
    return off / on


def _tok_s(schedule: Sequence[Arm], drift: float, seed: int = 3) -> dict[int, MetricVerdict]:
    blocks = TwinBlocks(
        ARMS, concurrencies=(56, 60), noise_pct=2.0, drift_pct_per_min=drift, seed=seed
    ).run(schedule)
    return {v.concurrency: v for v in analyse(blocks).for_metric("output_tok_s")}


def test_the_twins_truth_is_about_six_percent_at_60_running() -> None:
    assert _truth(60) == pytest.approx(85.2 / 80.2) and 1.05 < _truth(60) < 1.07


@pytest.mark.parametrize("seed", [3, 11])
def test_with_drift_abba_recovers_the_true_effect_and_naive_order_does_not(seed: int) -> None:
    abba = _tok_s(counterbalanced(12), drift=0.2, seed=seed)
    flat = _tok_s(naive(12), drift=0.2, seed=seed)
    for c in (56, 60):
        truth = _truth(c)
        a, f = abba[c], flat[c]
        assert a.ci_low is not None and a.ci_high is not None, a  # 6 pairs measured each level
        assert f.ratio is not None and f.ci_low is not None and f.ci_high is not None, f
        assert a.ci_low <= truth <= a.ci_high, a
        assert a.verdict == "better"
        # the naive order measures B ~6 blocks (~25 model minutes) later: drift eats the gain
        assert not f.ci_low <= truth <= f.ci_high, f
        assert f.ratio < truth - 0.02
    # the drift diagnostic sees the drift in A's blocks in both orders
    assert abba[60].drift_rho_a is not None and flat[60].drift_rho_a is not None
    assert abba[60].drift_rho_a < -0.8 and flat[60].drift_rho_a < -0.8
    # at 60 running the naive order even calls a real 6% gain "equivalent": drift hides it
    assert flat[60].verdict in ("equivalent", "inconclusive")


def test_without_drift_both_orders_find_the_effect() -> None:
    for schedule in (counterbalanced(12), naive(12)):
        v = _tok_s(schedule, drift=0.0)[60]
        assert v.ci_low is not None and v.ci_high is not None  # 6 pairs measured it
        assert v.verdict == "better" and v.ci_low <= _truth(60) <= v.ci_high
