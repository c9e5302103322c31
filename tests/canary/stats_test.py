from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dsv4ops.canary import records as R
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.stats import (
    clean_json,
    describe,
    per_second_tokens,
    percentile,
    span_s,
    steady_window,
    summarize,
)


def test_percentiles_match_numpy() -> None:
    rng = random.Random(2)
    xs = [rng.expovariate(1.0) for _ in range(501)]
    for q in (50, 90, 95, 99):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    d = describe(xs)
    assert d["std"] == pytest.approx(float(np.std(xs)))
    assert math.isnan(percentile([], 50))


def test_summary_uses_bench_serving_keys_and_1s_buckets() -> None:
    s = 1_000_000_000
    recs = []
    for i in range(4):
        r = RequestRecord(rid=str(i), t_send=s, t_end=s + 2 * s, usage_tokens=10, prompt_tokens=5)
        r.token_times = [s + k * 200_000_000 for k in range(1, 11)]  # 10 tokens over 2 s
        recs.append(r)
    recs.append(RequestRecord(rid="bad", t_send=s, t_end=s, error="http_status"))
    out = summarize(recs, duration_s=2.0, max_concurrency=4, t0_ns=s)
    for key in (
        "output_throughput",
        "median_ttft_ms",
        "p99_itl_ms",
        "mean_tpot_ms",
        "p90_e2e_latency_ms",
        "request_throughput",
        "total_output_tokens",
        "completed",
    ):
        assert key in out
    assert out["completed"] == 4 and out["failed"] == 1
    assert out["output_throughput"] == pytest.approx(20.0)
    assert out["median_itl_ms"] == pytest.approx(200.0)
    assert out["errors_by_kind"] == {"http_status": 1}
    assert per_second_tokens(recs, s) == [16, 20, 4]


S = 1_000_000_000


def _stream(
    rid: str, first_s: float, gap_s: float, n: int, *, end_s: float, **kw: object
) -> RequestRecord:
    r = RequestRecord(rid=rid, t_send=S, t_end=S + int(end_s * S), **kw)  # type: ignore[arg-type]
    r.token_times = [S + int((first_s + k * gap_s) * S) for k in range(n)]
    return r


def test_deliberate_cancellations_are_their_own_outcome_and_every_token_counts() -> None:
    """The sweep's case: long streams cut at the end are not failures, and their tokens count."""
    done = [
        _stream(f"d{i}", 0.1, 0.1, 10, end_s=1.05, usage_tokens=10, prompt_tokens=7)
        for i in range(2)
    ]
    # cut by the canary at 2.0 s after 19 tokens (no usage chunk: counted events), ITL 0.1 s
    cut = [_stream(f"c{i}", 0.1, 0.1, 19, end_s=2.0, error=R.ERR_CANCELLED) for i in range(3)]
    # a real failure: 4 tokens came before the server broke the stream; a 3 s stall inside
    broken = _stream("f", 0.5, 1.0, 4, end_s=4.0, error=R.ERR_DISCONNECT)
    out = summarize([*done, *cut, broken], duration_s=4.0)
    assert (out["completed"], out["cancelled"], out["failed"]) == (2, 3, 1)
    assert out["output_tokens_by_outcome"] == {"completed": 20, "cancelled": 57, "failed": 4}
    assert out["total_output_tokens"] == 81 and out["output_throughput"] == pytest.approx(81 / 4.0)
    assert out["request_throughput"] == pytest.approx(2 / 4.0)  # completed requests per second
    assert out["total_input_tokens"] == 14  # only a finished stream carries usage
    assert out["errors_by_kind"] == {R.ERR_DISCONNECT: 1}  # failures only: sums to `failed`
    # TTFT and ITL over completed and cancelled streams; the failure's 1 s gaps are not in them
    assert out["max_ttft_ms"] == pytest.approx(100.0) and out["max_itl_ms"] == pytest.approx(100.0)
    # E2E and TPOT over completed only: a cut stream's end is the cut, not the answer's end
    assert out["max_e2e_latency_ms"] == pytest.approx(1050.0)
    assert out["mean_tpot_ms"] == pytest.approx((1.05 - 0.1) / 9 * 1e3)
    assert out["concurrency"] == pytest.approx((2 * 1.05 + 3 * 2.0) / 4.0)  # mean in flight
    assert sum(out["output_tokens_per_s_buckets"]) == 81  # the buckets see every token too


def test_duration_defaults_to_the_records_span() -> None:
    a = RequestRecord(rid="a", t_queued=S, t_send=S + S // 2, t_end=2 * S)
    b = RequestRecord(rid="b", t_send=S + S // 4, t_end=3 * S + S // 2)
    assert span_s([a, b]) == pytest.approx(2.5) and span_s([]) == 0.0
    assert summarize([a, b])["duration"] == pytest.approx(2.5)
    assert summarize([a, b])["request_throughput"] == pytest.approx(2 / 2.5)


def test_clean_json_removes_nan() -> None:
    assert clean_json({"a": [math.nan, 1.0], "b": math.inf}) == {"a": [None, 1.0], "b": None}


def _closed_loop_soak(
    *, streams: int, run_s: int, request_s: float, drain_s: int
) -> tuple[list[RequestRecord], int]:
    """A closed loop of `streams` workers at 100 tok/s each: requests of `request_s` back to
    back until `run_s`, then the last ones slowly finish over `drain_s` (a real server's tail:
    one per worker, at a tenth of the speed)."""
    t0 = S
    recs: list[RequestRecord] = []
    for w in range(streams):
        t = t0 + w * 10_000_000
        while t < t0 + run_s * S:
            r = RequestRecord(rid=f"{w}-{len(recs)}", t_send=t)
            n = int(request_s * 100)
            r.token_times = [t + (k + 1) * 10_000_000 for k in range(n)]
            r.t_first, r.t_end = r.token_times[0], r.token_times[-1]
            recs.append(r)
            t = r.t_end
        # the last request of each worker: the drain, slow
        r = recs[-1]
        r.token_times = r.token_times + [
            r.t_end + (k + 1) * 100_000_000 for k in range(drain_s * 10 - w)
        ]
        r.t_end = r.token_times[-1]
    return recs, t0


def test_the_steady_window_leaves_out_the_measured_drain_tail() -> None:
    # 30 s at full load, then ~8 s of tail at a tenth of the rate (issue 38: the real server's
    # drain took ~8 s; a fixed 1 s cut read it as a decay from 288 to 108 tok/s)
    recs, t0 = _closed_loop_soak(streams=4, run_s=30, request_s=2.0, drain_s=8)
    every = per_second_tokens(recs, t0)
    w = steady_window(recs, t0, concurrency=4)
    assert w.ramp_s == 3 and w.drain_s >= 8  # the first generation (2 s requests) left out too
    assert len(w.buckets) >= 25
    assert min(w.buckets) >= 390  # every second inside is at full strength (4 x 100)
    assert len(every) == w.ramp_s + len(w.buckets) + w.drain_s


def test_a_real_decay_inside_the_steady_window_is_still_seen() -> None:
    recs, t0 = _closed_loop_soak(streams=4, run_s=30, request_s=2.0, drain_s=1)
    for r in recs:  # the second half of the run at a third of the rate
        r.token_times = [
            t if t < t0 + 15 * S else t0 + 15 * S + (t - t0 - 15 * S) * 3 for t in r.token_times
        ]
    from dsv4ops.canary.suites.smoke import _judge_decay
    from dsv4ops.canary.verdict import Findings

    f = Findings()
    _judge_decay(f, steady_window(recs, t0, concurrency=4))
    assert f.failures and "decayed" in f.failures[0]
    # seen by a client whose own event loop lagged, the same fall is not evidence of the server
    lagged = Findings()
    _judge_decay(lagged, steady_window(recs, t0, concurrency=4), client_bound=True)
    assert not lagged.failures and "client-bound" in lagged.inconclusive[0]
    healthy, t1 = _closed_loop_soak(streams=4, run_s=30, request_s=2.0, drain_s=8)
    g = Findings()
    _judge_decay(g, steady_window(healthy, t1, concurrency=4))
    assert not g.failures and not g.inconclusive


def test_the_first_cycle_of_a_closed_loop_is_not_the_sustained_load() -> None:
    # What the real CPU server did (issue 38, 90 s soak): the first generation, prefilled together
    # and decoded with nothing arriving, ran several seconds at 2-3x the rate the load then held
    # for good. A window from the first decoded token read its end as "decayed from 158 to 73
    # tok/s". Here: 4 streams, a first request of 8 s at 100 tok/s each, then 2 s requests at
    # 25 tok/s each (the rate that holds) until 30 s.
    t0 = S
    recs: list[RequestRecord] = []
    for worker in range(4):
        t, first = t0 + worker * 10_000_000, True
        while t < t0 + 30 * S:
            n, step = (800, 10_000_000) if first else (50, 40_000_000)
            r = RequestRecord(rid=f"{worker}-{len(recs)}", t_send=t)
            r.token_times = [t + (k + 1) * step for k in range(n)]
            r.t_first, r.t_end = r.token_times[0], r.token_times[-1]
            recs.append(r)
            t, first = r.t_end, False
    from dsv4ops.canary.suites.smoke import _judge_decay
    from dsv4ops.canary.verdict import Findings

    w = steady_window(recs, t0, concurrency=4)
    assert w.ramp_s >= 8 and len(w.buckets) >= 15  # the first cycle is out of the window
    f = Findings()
    _judge_decay(f, w)
    assert not f.failures and not f.inconclusive, f.failures
    # the window from the first decoded token (before this change) judged the same load a decay
    every = per_second_tokens(recs, t0)
    old = every[1 : w.ramp_s + len(w.buckets)]
    third = len(old) // 3
    assert sum(old[-third:]) / third < 0.5 * sum(old[:third]) / third


def test_a_soak_all_ramp_and_drain_is_too_short_to_judge() -> None:
    recs, t0 = _closed_loop_soak(streams=2, run_s=3, request_s=2.0, drain_s=5)
    from dsv4ops.canary.suites.smoke import _judge_decay
    from dsv4ops.canary.verdict import Findings

    f = Findings()
    _judge_decay(f, steady_window(recs, t0, concurrency=2))
    assert f.inconclusive and "too short" in f.inconclusive[0] and not f.failures
