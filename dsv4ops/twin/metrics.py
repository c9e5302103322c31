"""SGLang's Prometheus metrics (names and labels of 0.5.23), served only with --enable-metrics.

Scheduler gauges show what rank 0's reporter last published (`reporter.py`: at the decode log
interval, on prefill batches, on the idle path; frozen while the loop is blocked), never the live
state. Counters (realtime tokens, PD failures) are read as they stand. Tokenizer counters and
histograms are recorded by the request path. Throughputs and latencies are in model time
(wall / scale).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .memory import GRAPH_MEMORY_PHASES, MemoryUsage
from .reporter import SchedStats

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0, 120.0, 300.0)
ITL_BUCKETS = (0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


@dataclass
class SchedulerSnapshot:
    published: SchedStats
    realtime_tokens: dict[str, int]
    graph_passes: dict[str, int]
    idle_seconds: float
    transfer_failed_total: int
    bootstrap_failed_total: int
    max_total_num_tokens: int
    context_len: int
    page_size: int
    # /server_info's memory_usage (memory.py), which 0.5.23's start-up gauges repeat
    memory: MemoryUsage = field(default_factory=lambda: MemoryUsage())


def _gauges(s: SchedulerSnapshot) -> dict[str, tuple[str, float]]:
    """Each plain gauge of the scheduler's collector: name -> (help, value), as rank 0 publishes
    them (last-published stats) and the constants emitted at start."""
    p = s.published
    return {
        "sglang:num_running_reqs": ("The number of running requests.", p.running),
        "sglang:num_queue_reqs": ("The number of requests in the waiting queue.", p.queued),
        "sglang:num_grammar_queue_reqs": ("Grammar queue", 0),
        "sglang:gen_throughput": ("The generation throughput (token/s).", p.gen_throughput),
        "sglang:cache_hit_rate": ("Prefix cache hit rate", 0.0),
        "sglang:token_usage": ("The token usage.", p.token_usage),
        "sglang:num_prefill_bootstrap_queue_reqs": (
            "Prefill bootstrap queue",
            p.prefill_bootstrap_queue,
        ),
        "sglang:num_prefill_inflight_queue_reqs": (
            "Prefill inflight queue",
            p.prefill_inflight_queue,
        ),
        "sglang:num_decode_prealloc_queue_reqs": ("Decode prealloc queue", p.decode_prealloc_queue),
        "sglang:num_decode_transfer_queue_reqs": ("Decode transfer queue", p.decode_transfer_queue),
        # 0.5.23 declares it but its reporter never sets it (metrics_collector.py L731, L1721)
        "sglang:is_cuda_graph": ("Whether the batch is using CUDA graph.", 0),
        "sglang:max_total_num_tokens": ("KV pool size in tokens", s.max_total_num_tokens),
        "sglang:context_len": ("Context length", s.context_len),
        "sglang:page_size": ("Page size", s.page_size),
        # emit_constants (metrics_collector.py L1769-1800): the memory_usage numbers
        "sglang:weight_memory_usage_gb": (
            "Memory used by model weights in GB.",
            s.memory.get("weight", 0.0),
        ),
        "sglang:kv_cache_memory_usage_gb": (
            "Memory used by the KV cache pools in GB.",
            s.memory.get("kvcache", 0.0),
        ),
        "sglang:startup_available_gpu_memory_gb": (
            "Available GPU memory in GB at startup.",
            s.memory.get("startup_available", 0.0),
        ),
    }


class _SchedulerCollector(Collector):
    """Rank 0's scheduler metrics (labels as metrics_collector.py L1381-1393)."""

    def __init__(self, labels: dict[str, str], snapshot: Callable[[], SchedulerSnapshot]) -> None:
        self._labels = labels
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        s = self._snapshot()
        names, values = list(self._labels), list(self._labels.values())
        gauges = _gauges(s)
        for name, (doc, value) in gauges.items():
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(values, float(value))
            yield g
        graph = GaugeMetricFamily(
            "sglang:graph_memory_usage_gb",
            "Memory used by captured device graphs in GB.",
            labels=[*names, "phase"],
        )
        for phase in GRAPH_MEMORY_PHASES:  # metrics_collector.py L1313, L1787-1791
            graph.add_metric([*values, phase], float(s.memory.get("graph", {}).get(phase, 0.0)))
        yield graph
        counters = {
            "sglang:num_transfer_failed_reqs": ("KV transfers failed", s.transfer_failed_total),
            "sglang:num_bootstrap_failed_reqs": ("Bootstraps failed", s.bootstrap_failed_total),
        }
        for name, (doc, value) in counters.items():
            c = CounterMetricFamily(name, doc, labels=names)
            # 0.5.23 calls .labels(...) only in increment_*_failed_reqs (metrics_collector.py
            # L1434-1438): the labelled series is absent, not 0, until the first failure.
            if value:
                c.add_metric(values, float(value))
            yield c
        idle = CounterMetricFamily(
            "sglang:scheduler_idle_seconds",
            "Total wall time while the scheduler has no runnable or queued work.",
            labels=names,
        )
        idle.add_metric(values, s.idle_seconds)  # registered at 0 (metrics_collector.py L1086)
        yield idle
        rt = CounterMetricFamily(
            "sglang:realtime_tokens",
            "Total number of tokens processed (updated on each log interval). "
            "mode: prefill_compute, prefill_cache, decode.",
            labels=[*names, "mode"],
        )
        for mode, value in s.realtime_tokens.items():
            if value:  # a labelled child appears on its first increment (inc(0) is skipped)
                rt.add_metric([*values, mode], float(value))
        yield rt
        gp = CounterMetricFamily(
            "sglang:cuda_graph_passes",
            "Total number of forward passes categorized by CUDA graph.",
            labels=[*names, "mode"],
        )
        for mode, value in sorted(s.graph_passes.items()):
            gp.add_metric([*values, mode], float(value))  # a child appears on its first pass
        yield gp


class TwinMetrics:
    def __init__(
        self, *, model_name: str, engine_type: str, snapshot: Callable[[], SchedulerSnapshot]
    ) -> None:
        self.registry = CollectorRegistry()
        sched = {
            "model_name": model_name,
            "engine_type": engine_type,
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        self.registry.register(_SchedulerCollector(sched, snapshot))
        tok = ["model_name", "engine_type"]
        self._tok = {"model_name": model_name, "engine_type": engine_type}
        r = self.registry
        self.prompt_tokens = Counter(
            "sglang:prompt_tokens", "Prompt tokens", [*tok, "is_streaming"], registry=r
        )
        self.generation_tokens = Counter(
            "sglang:generation_tokens", "Generated tokens", [*tok, "is_streaming"], registry=r
        )
        self.num_requests = Counter(
            "sglang:num_requests", "Requests", [*tok, "is_streaming"], registry=r
        )
        self.aborted = Counter("sglang:num_aborted_requests", "Aborted requests", tok, registry=r)
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "TTFT",
            [*tok, "is_streaming"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds", "ITL", tok, buckets=ITL_BUCKETS, registry=r
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds",
            "E2E latency",
            [*tok, "is_streaming"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.startup = Gauge(
            "sglang:startup_time_seconds", "Startup time", [*tok, "phase"], registry=r
        )
        self.http_requests = Counter(
            "sglang:http_requests", "HTTP requests", ["endpoint", "method"], registry=r
        )

    def labels(self, streaming: bool | None = None) -> dict[str, str]:
        if streaming is None:
            return dict(self._tok)
        return {**self._tok, "is_streaming": str(streaming).lower()}

    def record_request(
        self,
        *,
        streaming: bool,
        prompt_tokens: int,
        completion_tokens: int,
        ttft_s: float | None,
        e2e_s: float,
        aborted: bool,
    ) -> None:
        lab = self.labels(streaming)
        self.num_requests.labels(**lab).inc()
        self.prompt_tokens.labels(**lab).inc(prompt_tokens)
        self.generation_tokens.labels(**lab).inc(completion_tokens)
        if ttft_s is not None:
            self.ttft.labels(**lab).observe(ttft_s)
        self.e2e.labels(**lab).observe(e2e_s)
        if completion_tokens > 1 and ttft_s is not None:
            self.itl.labels(**self.labels()).observe(
                max(e2e_s - ttft_s, 0.0) / (completion_tokens - 1)
            )
        if aborted:
            self.aborted.labels(**self.labels()).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
