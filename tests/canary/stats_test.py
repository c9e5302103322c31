from __future__ import annotations

import math
import random

import numpy as np
import pytest

from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.stats import clean_json, describe, per_second_tokens, percentile, summarize


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
    for key in ("output_throughput", "median_ttft_ms", "p99_itl_ms", "mean_tpot_ms",
                "p90_e2e_latency_ms", "request_throughput", "total_output_tokens", "completed"):
        assert key in out
    assert out["completed"] == 4 and out["failed"] == 1
    assert out["output_throughput"] == pytest.approx(20.0)
    assert out["median_itl_ms"] == pytest.approx(200.0)
    assert out["errors_by_kind"] == {"http_status": 1}
    assert per_second_tokens(recs, s) == [16, 20, 4]


def test_clean_json_removes_nan() -> None:
    assert clean_json({"a": [math.nan, 1.0], "b": math.inf}) == {"a": [None, 1.0], "b": None}
