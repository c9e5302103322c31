"""Run statistics: percentiles, per-second throughput buckets and bench_serving-named summaries.

`summarize()` returns keys exactly as sglang's bench_serving writes them (reference
sglang-0.5.23.md §8: `output_throughput`, `median_ttft_ms`, `p99_itl_ms`, ...), so dashboards and
scripts that read bench_serving JSON read canary reports unchanged.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dsv4ops.canary.records import RequestRecord
from dsv4ops.jsontypes import JSONObject, JSONValue


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


@dataclass(frozen=True)
class SteadyWindow:
    """The 1-s output buckets of a load at full strength: after its ramp (every first stream
    has its first token) and before its drain (the first stream that ended after the last
    request was sent, and so was not replaced). Both ends are measured from the records."""

    buckets: list[int]
    ramp_s: int  # buckets dropped at the start
    drain_s: int  # buckets dropped at the end


def steady_window(
    records: Sequence[RequestRecord], t0_ns: int, concurrency: int, *, open_loop: bool = False
) -> SteadyWindow:
    """Closed loop: the ramp ends when the first generation of streams has ended and been
    replaced (the second the last of the first `concurrency` requests ended; if one of them never
    ended, the second the concurrency-th stream first decoded), the drain starts when the first
    stream ends unreplaced. Open loop (Poisson arrivals, never all at once): the first second is
    the ramp, the last arrival starts the drain.

    Why the whole first generation: its requests arrive together, are prefilled together and
    then decode with nothing arriving, which the sustained load never does again (every later
    arrival interrupts the decode batch for its prefill and KV transfer). On the real CPU server
    that first cycle ran at ~190 tok/s and the load then held 50-100 tok/s for 90 s: judged from
    the first decoded token, a 40 s soak read the end of that cycle as a decay (issue 38)."""
    every = per_second_tokens(records, t0_ns)
    sent = sorted(r.t_send for r in records if r.t_send)
    if not every or not sent:
        return SteadyWindow([], 0, 0)
    firsts = sorted(r.t_first for r in records if r.t_first)
    ramp_at = t0_ns
    if firsts and not open_loop:
        ramp_at = firsts[min(concurrency, len(firsts)) - 1]
        first_generation = sorted((r for r in records if r.t_send), key=lambda r: r.t_send)
        ends = [r.t_end for r in first_generation[:concurrency]]
        if ends and all(ends):
            ramp_at = max(ramp_at, *ends)
    start = (ramp_at - t0_ns) // 1_000_000_000 + 1
    last_send = sent[-1]
    ends_after = [r.t_end for r in records if r.t_end and r.t_end >= last_send]
    drain_at = min(ends_after) if ends_after and not open_loop else last_send
    stop = max(start, (drain_at - t0_ns) // 1_000_000_000)  # that second is part-drained
    stop = min(stop, len(every))
    return SteadyWindow(every[start:stop], start, len(every) - stop)


def span_s(records: Iterable[RequestRecord]) -> float:
    """Seconds from the first request queued or sent to the last one ended (0 when none ran)."""
    starts = [r.t_queued or r.t_send for r in records if r.t_queued or r.t_send]
    ends = [r.t_end for r in records if r.t_end]
    return max(0.0, (max(ends) - min(starts)) / 1e9) if starts and ends else 0.0


def summarize(
    records: Sequence[RequestRecord],
    *,
    duration_s: float | None = None,
    max_concurrency: int | None = None,
    t0_ns: int | None = None,
) -> JSONObject:
    """bench_serving-compatible summary of a set of requests (latencies in ms).

    What enters each key (docs/canary.md "Report keys"; bench_serving never cancels a request, so
    where it has no rule the rule is the one that keeps its meaning):
    * `completed` / `cancelled` / `failed`: the three outcomes (records.py), summing to the requests;
    * `total_output_tokens`, `output_throughput`, the 1-s buckets: every output token received, from
      every request (usage.completion_tokens where the stream sent it, else its output events);
    * `total_input_tokens`: usage.prompt_tokens, which only a stream that ran to its end carries;
    * `request_throughput`: completed / duration;
    * TTFT, ITL, queue wait: completed and cancelled streams (a cut stream's first token and gaps
      are finished measurements); TPOT, E2E: completed only (a cut stream's end is our cut);
    * `concurrency`: mean requests in flight, Σ(send → end) of completed and cancelled / duration.
    `duration_s` defaults to the records' span (first queued → last ended).
    """
    ok = [r for r in records if r.ok]
    cut = [r for r in records if r.cancelled]
    measured = ok + cut
    failed = [r for r in records if not r.ok and not r.cancelled]
    tokens = {
        name: sum(r.output_tokens for r in group)
        for name, group in (("completed", ok), ("cancelled", cut), ("failed", failed))
    }
    out_tokens = sum(tokens.values())
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    if duration_s is None:
        duration_s = span_s(records)
    dur = max(duration_s, 1e-9)
    summary: JSONObject = {
        "backend": "dsv4ops-canary",
        "max_concurrency": max_concurrency,
        "duration": duration_s,
        "completed": len(ok),
        "cancelled": len(cut),
        "failed": len(failed),
        "completed_without_done": sum(1 for r in ok if r.ended_without_done),
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "output_tokens_by_outcome": tokens,
        "request_throughput": len(ok) / dur,
        "input_throughput": in_tokens / dur,
        "output_throughput": out_tokens / dur,
        "total_throughput": (in_tokens + out_tokens) / dur,
    }
    series = {
        "ttft": [r.ttft_s * 1e3 for r in measured if r.ttft_s is not None],
        "itl": [g * 1e3 for r in measured for g in r.itls_s],
        "tpot": [r.tpot_s * 1e3 for r in ok if r.tpot_s is not None],
        "e2e_latency": [r.e2e_s * 1e3 for r in ok if r.e2e_s is not None],
        "queue_wait": [r.queue_wait_s * 1e3 for r in measured if r.t_send],
    }
    for name, values in series.items():
        for stat, value in describe(values).items():
            summary[f"{stat}_{name}_ms"] = value
    # bench_serving's "concurrency": Σ latency / duration, i.e. the mean number in flight
    in_flight_s = sum(r.e2e_s or 0.0 for r in measured)
    summary["concurrency"] = in_flight_s / dur
    if t0_ns is None and records:
        sent = [r.t_send for r in records if r.t_send]
        t0_ns = min(sent) if sent else None
    buckets = per_second_tokens(records, t0_ns) if t0_ns is not None else []
    summary["max_output_tokens_per_s"] = max(buckets) if buckets else 0
    summary["output_tokens_per_s_buckets"] = buckets
    summary["errors_by_kind"] = dict(Counter(r.error for r in failed))
    usage_mismatch = [
        r for r in ok if r.usage_tokens is not None and r.usage_tokens != len(r.token_times)
    ]
    summary["usage_mismatch_count"] = len(usage_mismatch)
    return summary


def clean_json(value: JSONValue) -> JSONValue:
    """NaN/inf → None recursively, so report.json is strict JSON."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value
