"""The twin's GPU memory figures, from one source for both places 0.5.23 reports them.

SGLang 0.5.23 computes them once per scheduler and reports the same numbers twice:
`/server_info`'s `internal_states[i].memory_usage` (`scheduler_components/memory_usage.py`
build_memory_usage: weight, kvcache, startup_available, token_capacity, token_capacity_swa and
`graph` as a dict of GB per capture phase) and the start-up gauges (`scheduler.py`
emit_metrics_constants → `metrics_collector.py` emit_constants L1769-1800:
`sglang:weight_memory_usage_gb`, `kv_cache_memory_usage_gb`, `graph_memory_usage_gb{phase}`,
`startup_available_gpu_memory_gb`). Both read `tp_worker.graph_memory_usage`, the total of the
captured graphs per phase on one GPU, so `memory_usage.graph[phase]` equals the gauge of that
phase, and `decode_cuda_graph_memory_gb` is the sum of the decode phases (`internal_state.py`
L97-106, `_DECODE_GRAPH_PHASES`).
"""

from __future__ import annotations

from typing import TypedDict

from .perf import GRAPH_GB_PER_DECODE_BUCKET

# model_executor/graph_memory_usage.py GRAPH_MEMORY_USAGE_KEYS: every phase is reported, 0.0 if
# nothing was captured for it
GRAPH_MEMORY_PHASES = (
    "prefill",
    "decode",
    "target_verify",
    "draft_prefill",
    "draft_decode",
    "draft_extend",
)
# internal_state.py _DECODE_GRAPH_PHASES: what decode_cuda_graph_memory_gb sums
DECODE_GRAPH_PHASES = ("decode", "target_verify", "draft_decode", "draft_extend")
# Estimates for DSV4-Flash on TP4 (one GPU's share); the box reports its own.
WEIGHT_GB = 40.5
KVCACHE_GB = 30.0
GPU_GB = 95.0  # an RTX PRO 6000 Blackwell as torch sees it (~96 GB card)


class MemoryUsage(TypedDict, total=False):
    """`/server_info`'s `memory_usage` (build_memory_usage's keys, in its order); a scheduler
    snapshot without one has none of them."""

    weight: float
    kvcache: float
    startup_available: float
    token_capacity: int
    token_capacity_swa: None  # the twin models no SWA pool (whether DSV4 has one: UNVERIFIED)
    graph: dict[str, float]


def graph_memory_usage(buckets: list[int]) -> dict[str, float]:
    """GB per GPU of the captured graphs by phase (tp_worker.graph_memory_usage): the twin
    captures decode graphs only (a prefill none, no speculative decoding)."""
    usage = dict.fromkeys(GRAPH_MEMORY_PHASES, 0.0)
    usage["decode"] = round(GRAPH_GB_PER_DECODE_BUCKET * len(buckets), 3)
    return usage


def decode_cuda_graph_memory_gb(buckets: list[int]) -> float:
    graph = graph_memory_usage(buckets)
    return round(sum(graph[p] for p in DECODE_GRAPH_PHASES), 3)


def startup_available_gb(buckets: list[int]) -> float:
    """Free GPU memory once weights, KV pool and graphs are allocated (scheduler.py L1264)."""
    return round(GPU_GB - WEIGHT_GB - KVCACHE_GB - sum(graph_memory_usage(buckets).values()), 3)


def memory_usage(buckets: list[int], *, token_capacity: int) -> MemoryUsage:
    """`/server_info`'s `memory_usage`, in build_memory_usage's keys and order."""
    return {
        "weight": round(WEIGHT_GB, 3),
        "kvcache": round(KVCACHE_GB, 3),
        "startup_available": startup_available_gb(buckets),
        "token_capacity": int(token_capacity),
        "token_capacity_swa": None,  # the twin models no SWA pool (whether DSV4 has one: UNVERIFIED)
        "graph": {phase: round(gb, 3) for phase, gb in graph_memory_usage(buckets).items()},
    }
