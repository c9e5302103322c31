"""Gates first; partial or inconclusive keeps A; B only on positive evidence."""

from __future__ import annotations

from dsv4ops.ab.analysis import Analysis, MetricVerdict
from dsv4ops.ab.decision import GateResult, decide


def _v(metric: str, verdict: str, ratio: float, c: int = 60) -> MetricVerdict:
    return MetricVerdict(
        c,
        metric,
        verdict,  # type: ignore[arg-type]
        ratio,
        ratio - 0.01,
        ratio + 0.01,
        0.03,
        None,
        None,
        6,
        f"{verdict} because",
    )


def _an(*verdicts: MetricVerdict, partial: bool = False) -> Analysis:
    return Analysis(
        list(verdicts), partial, 12, notes=["3 of 12 planned blocks ran"] if partial else []
    )


GAIN = _v("output_tok_s", "better", 1.062)
WEDGED = GateResult("abort_cascade", "B", False, "decode wedged after 8 aborts in 2 s")


def test_b_wins_on_positive_evidence() -> None:
    d = decide(
        _an(GAIN, _v("itl_p50_ms", "equivalent", 1.0)),
        [GateResult("abort_cascade", "B", True, "ok")],
    )
    assert d.winner == "B" and d.reasons[0].startswith("B wins: output_tok_s better")
    assert d.rule == "b_better" and d.to_record()["decided_by"] == "b_better"
    assert "+6.2%" in d.reasons[0]


def test_a_failed_gate_on_b_keeps_a_whatever_its_throughput() -> None:
    d = decide(_an(GAIN), [GateResult("sweep", "B", True, "ok"), WEDGED])
    assert d.winner == "A" and d.rule == "b_failed_gate"
    assert "abort_cascade" in d.reasons[0] and "decode wedged after 8 aborts" in d.reasons[0]
    assert any("better" in r for r in d.reasons[1:])  # the gain is still reported


def test_partial_keeps_a_even_with_a_gain() -> None:
    d = decide(_an(GAIN, partial=True), [])
    assert (
        d.winner == "A"
        and d.rule == "partial"
        and "partial" in d.reasons[0]
        and "3 of 12" in d.reasons[0]
    )


def test_inconclusive_and_equivalent_keep_a() -> None:
    d = decide(_an(_v("output_tok_s", "inconclusive", 1.03)), [])
    assert d.winner == "A" and d.rule == "inconclusive"
    assert "no output_tok_s gain shown" in d.reasons[0]
    d = decide(_an(_v("output_tok_s", "equivalent", 1.001)), [])
    assert d.winner == "A" and d.rule == "equivalent" and "equivalent" in d.reasons[0]
    d = decide(_an(), [])
    assert d.winner == "A" and d.rule == "nothing_measured"
    assert "no output_tok_s was measured" in d.reasons[0]


def test_worse_anywhere_on_the_primary_or_beyond_the_band_elsewhere_keeps_a() -> None:
    d = decide(_an(GAIN, _v("output_tok_s", "worse", 0.95, c=8)), [])
    assert d.winner == "A" and d.rule == "b_worse"
    assert "worse on output_tok_s at concurrency 8" in d.reasons[0]
    d = decide(_an(GAIN, _v("ttft_p99_ms", "worse", 1.30)), [])
    assert d.winner == "A" and d.rule == "guard_worse" and "ttft_p99_ms" in d.reasons[0]
    # worse but within the band (a 1% ITL cost for a 6% throughput gain) does not block B
    d = decide(_an(GAIN, _v("itl_p50_ms", "worse", 1.01)), [])
    assert d.winner == "B"
    # worse, its point beyond the band but its CI reaching into it (a CI run's noisy TTFT p99:
    # B/A 1.039, CI 1.016-1.066): no cost beyond the band is shown, B's gain stands
    noisy = MetricVerdict(
        60, "ttft_p99_ms", "worse", 1.039, 1.016, 1.066, 0.25, None, None, 3, "worse because"
    )
    assert decide(_an(GAIN, noisy), []).winner == "B"


def test_a_failed_gate_on_a_is_reported_but_b_still_needs_evidence() -> None:
    gate = GateResult("corruption", "A", False, "3 corrupted tool calls")
    d = decide(_an(_v("output_tok_s", "inconclusive", 1.0)), [gate])
    assert d.winner == "A" and any("A also failed the corruption gate" in r for r in d.reasons)


def test_another_primary_metric() -> None:
    d = decide(_an(GAIN, _v("itl_p99_ms", "better", 0.9)), [], primary="itl_p99_ms")
    assert d.winner == "B" and "itl_p99_ms" in d.reasons[0] and "-10.0%" in d.reasons[0]


def test_the_fitted_law_trading_intercept_for_slope_does_not_block_b() -> None:
    # step-4 vs step-8 over the running batch: a larger intercept, a smaller slope, more tok/s
    d = decide(
        _an(GAIN, _v("step_a_ms", "worse", 1.33, c=0), _v("step_b_ms", "better", 0.9, c=0)), []
    )
    assert d.winner == "B"


def test_the_design_stops_only_when_more_pairs_cannot_change_the_outcome() -> None:
    from dsv4ops.ab.decision import settled

    eq56, open57 = (
        _v("output_tok_s", "equivalent", 1.0, c=56),
        _v("output_tok_s", "inconclusive", 1.02, c=57),
    )
    assert settled(_an(GAIN), [])  # better: B
    assert settled(_an(_v("output_tok_s", "worse", 0.9)), [])  # worse: A
    assert settled(_an(eq56, _v("output_tok_s", "equivalent", 1.0, c=57)), [])  # all equivalent: A
    assert not settled(_an(eq56, open57), [])  # one level still open: another pair
    assert settled(_an(eq56, open57), [WEDGED])  # a failed gate settles it for A
    harm = _v("itl_p99_ms", "worse", 1.2)  # its whole interval beyond the ±2% guard band
    assert settled(_an(open57, harm), []) and decide(_an(open57, harm), []).winner == "A"
    noisy = _v("itl_p99_ms", "worse", 1.015)  # worse, but not shown beyond the band
    assert not settled(_an(open57, noisy), [])
    assert not settled(_an(), [])  # nothing measured yet
