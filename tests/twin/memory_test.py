"""The twin reports its GPU memory as SGLang 0.5.23 does: one set of numbers, shown both in
/server_info's memory_usage (a dict of GB per capture phase under `graph`) and in the start-up
gauges of /metrics (read with prometheus_client's parser, through a real twin process)."""

from __future__ import annotations

import httpx
import pytest

from dsv4ops.metrics.prom import parse_text, server_gauges
from dsv4ops.twin.memory import DECODE_GRAPH_PHASES, GRAPH_MEMORY_PHASES
from testing.twin import twin_server

pytestmark = pytest.mark.slow

BUCKETS = ["1", "2", "4", "8", "16", "24", "32"]


def test_server_info_memory_usage_and_the_memory_gauges_are_one_set_of_numbers() -> None:
    args = [
        "--disaggregation-mode",
        "decode",
        "--enable-metrics",
        "--cuda-graph-bs-decode",
        *BUCKETS,
    ]
    with twin_server(args) as proc:
        info = httpx.get(proc.url + "/server_info", timeout=10).json()
        samples = parse_text(httpx.get(proc.url + "/metrics", timeout=10).text)
    state = info["internal_states"][0]
    usage = state["memory_usage"]
    # 0.5.23's build_memory_usage keys; `graph` is per phase, never one scalar
    assert list(usage) == [
        "weight",
        "kvcache",
        "startup_available",
        "token_capacity",
        "token_capacity_swa",
        "graph",
    ]
    assert list(usage["graph"]) == list(GRAPH_MEMORY_PHASES)
    for phase in GRAPH_MEMORY_PHASES:
        assert samples.total("sglang:graph_memory_usage_gb", phase=phase) == usage["graph"][phase]
    # the twin's per-bucket estimate, summed over the captured buckets of this decode
    assert usage["graph"]["decode"] == pytest.approx(0.02 * len(BUCKETS))
    assert state["decode_cuda_graph_memory_gb"] == pytest.approx(
        sum(usage["graph"][p] for p in DECODE_GRAPH_PHASES)
    )
    assert server_gauges(samples).decode_graph_memory_gb == state["decode_cuda_graph_memory_gb"]
    for gauge, key in (
        ("weight_memory_usage_gb", "weight"),
        ("kv_cache_memory_usage_gb", "kvcache"),
        ("startup_available_gpu_memory_gb", "startup_available"),
    ):
        assert samples.total(f"sglang:{gauge}") == usage[key], gauge
    assert usage["token_capacity"] == info["max_total_num_tokens"]
