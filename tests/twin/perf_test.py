from __future__ import annotations

import pytest

from dsv4ops.twin.perf import (
    default_decode_buckets,
    padded_batch,
    resolve_decode_buckets,
    step_ms,
)

STEP8 = list(range(32, 97, 8))


def test_padded_batch_rounds_up_to_the_captured_bucket_and_runs_eager_above() -> None:
    assert padded_batch(56, STEP8) == 56
    assert padded_batch(57, STEP8) == 64
    assert padded_batch(1, STEP8) == 32
    assert padded_batch(97, STEP8) == 97
    assert padded_batch(0, STEP8) == 0


def test_step_law_reproduces_the_seed_sawtooth_at_56_to_57() -> None:
    tok_s = {c: c / step_ms(c, STEP8, a=18, b=1.05, hidden_ms=0) * 1000 for c in (56, 57)}
    assert tok_s[56] == pytest.approx(726, rel=0.03)
    assert tok_s[57] == pytest.approx(663, rel=0.03)


def test_overlap_hides_part_of_the_fixed_term_for_5_to_7_percent_at_high_concurrency() -> None:
    for c in (56, 64):
        off = step_ms(c, STEP8, a=18, b=1.05, hidden_ms=0)
        on = step_ms(c, STEP8, a=18, b=1.05, hidden_ms=5)
        assert 1.05 <= off / on <= 1.075


def test_default_buckets_follow_sglang_generation_and_runtime_clamp() -> None:
    assert default_decode_buckets(160)[:8] == [1, 2, 4, 8, 12, 16, 24, 32]
    assert default_decode_buckets(512)[-1] == 512
    assert len(default_decode_buckets(512)) == 52
    tp4 = resolve_decode_buckets(
        explicit=None,
        max_bs=None,
        max_running_requests=None,
        tp_size=4,
        disable_padding=False,
        disabled=False,
    )
    assert tp4[-1] == 256  # generated up to 512, clamped by the DSV4 request pool
    clamped = resolve_decode_buckets(
        explicit=None,
        max_bs=None,
        max_running_requests=64,
        tp_size=4,
        disable_padding=False,
        disabled=False,
    )
    assert clamped[-1] == 64
    explicit = resolve_decode_buckets(
        explicit=(96, 32, 40),
        max_bs=None,
        max_running_requests=None,
        tp_size=4,
        disable_padding=False,
        disabled=False,
    )
    assert explicit == [32, 40, 96]
    assert resolve_decode_buckets(
        explicit=None,
        max_bs=8,
        max_running_requests=None,
        tp_size=1,
        disable_padding=True,
        disabled=False,
    ) == list(range(1, 9))
    assert (
        resolve_decode_buckets(
            explicit=None,
            max_bs=None,
            max_running_requests=None,
            tp_size=4,
            disable_padding=False,
            disabled=True,
        )
        == []
    )


def test_a_batch_no_graph_holds_runs_eager_at_the_eager_factor_never_faster_than_the_graph() -> (
    None
):
    """Above the largest bucket the step was the unpadded law: 97 running cost less than the
    graph of 96 would. Eager (no graph; every batch with graphs off) costs the factor."""
    law = dict(a=18.0, b=1.05, hidden_ms=0.0)
    graph_96 = step_ms(96, STEP8, **law, eager_factor=2.0)
    assert graph_96 == pytest.approx(18 + 1.05 * 96)  # inside the graphs: the law, unchanged
    assert step_ms(97, STEP8, **law, eager_factor=2.0) == pytest.approx(2 * (18 + 1.05 * 97))
    assert step_ms(97, STEP8, **law, eager_factor=2.0) > graph_96
    assert step_ms(4, [], **law, eager_factor=3.0) == pytest.approx(3 * (18 + 1.05 * 4))
    assert step_ms(97, STEP8, **law) == pytest.approx(18 + 1.05 * 97)  # factor 1: the bare law
