"""Run statistics: percentiles, per-second throughput buckets and bench_serving-named summaries.

`summarize()` returns keys exactly as sglang's bench_serving writes them (reference
sglang-0.5.23.md §8: `output_throughput`, `median_ttft_ms`, `p99_itl_ms`, ...), so dashboards and
scripts that read bench_serving JSON read canary reports unchanged.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from dsv4ops.canary.records import RequestRecord


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method); q in 0..100. NaN when empty."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def describe(values: Sequence[float]) -> dict[str, float]:
    """mean, median, std (population), p90, p95, p99, max: the bench_serving set plus max."""
    if not values:
        return {k: math.nan for k in ("mean", "median", "std", "p90", "p95", "p99", "max")}
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    return {
        "mean": mean,
        "median": percentile(values, 50),
        "std": std,
        "p90": percentile(values, 90),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


def per_second_tokens(records: Iterable[RequestRecord], t0_ns: int) -> list[int]:
    """Output events received in each 1-second bucket from t0."""
    counts: Counter[int] = Counter()
    for r in records:
        for t in r.token_times:
            counts[(t - t0_ns) // 1_000_000_000] += 1
    if not counts:
        return []
    last = max(counts)
    return [counts.get(i, 0) for i in range(last + 1)]


def summarize(
    records: Sequence[RequestRecord],
    *,
    duration_s: float,
    max_concurrency: int | None = None,
    t0_ns: int | None = None,
) -> dict[str, Any]:
    """bench_serving-compatible summary of a set of requests (latencies in ms)."""
    ok = [r for r in records if r.ok]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    dur = max(duration_s, 1e-9)
    summary: dict[str, Any] = {
        "backend": "dsv4ops-canary",
        "max_concurrency": max_concurrency,
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / dur,
        "input_throughput": in_tokens / dur,
        "output_throughput": out_tokens / dur,
        "total_throughput": (in_tokens + out_tokens) / dur,
    }
    series = {
        "ttft": [r.ttft_s * 1e3 for r in ok if r.ttft_s is not None],
        "itl": [g * 1e3 for r in ok for g in r.itls_s],
        "tpot": [r.tpot_s * 1e3 for r in ok if r.tpot_s is not None],
        "e2e_latency": [r.e2e_s * 1e3 for r in ok if r.e2e_s is not None],
        "queue_wait": [r.queue_wait_s * 1e3 for r in ok],
    }
    for name, values in series.items():
        for stat, value in describe(values).items():
            summary[f"{stat}_{name}_ms"] = value
    # bench_serving's "concurrency": sum of latencies / duration
    summary["concurrency"] = sum(series["e2e_latency"]) / 1e3 / dur
    if t0_ns is None and ok:
        t0_ns = min(r.t_send for r in ok)
    buckets = per_second_tokens(ok, t0_ns) if t0_ns is not None else []
    summary["max_output_tokens_per_s"] = max(buckets) if buckets else 0
    summary["output_tokens_per_s_buckets"] = buckets
    summary["errors_by_kind"] = dict(Counter(r.error for r in records if r.error))
    usage_mismatch = [
        r for r in ok if r.usage_tokens is not None and r.usage_tokens != len(r.token_times)
    ]
    summary["usage_mismatch_count"] = len(usage_mismatch)
    return summary


def clean_json(value: Any) -> Any:
    """NaN/inf → None recursively, so report.json is strict JSON."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value
