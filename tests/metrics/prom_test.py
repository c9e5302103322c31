from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from dsv4ops.metrics.prom import MetricsParseError, parse_text, server_gauges

# The shape SGLang 0.5.23 exposes with --enable-metrics (scheduler label set, two TP ranks
# reporting with --enable-metrics-for-all-schedulers).
SGLANG_TEXT = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="decode",model_name="dsv4",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 57.0
sglang:num_running_reqs{engine_type="decode",model_name="dsv4",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 3.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="decode",model_name="dsv4",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 4.0
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{engine_type="decode",model_name="dsv4",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 663.5
# HELP sglang:num_aborted_requests_total Number of aborted requests.
# TYPE sglang:num_aborted_requests_total counter
sglang:num_aborted_requests_total{engine_type="decode",model_name="dsv4"} 12.0
"""


def test_sglang_gauges_are_summed_over_label_sets() -> None:
    g = server_gauges(parse_text(SGLANG_TEXT))
    assert g.running == 60.0 and g.queued == 4.0 and g.in_system == 64.0
    assert g.gen_throughput == 663.5
    assert g.aborted_total == 12.0
    assert g.engine_types == ("decode",)
    assert g.has_load_gauges


def test_label_match_and_absent_metrics() -> None:
    samples = parse_text(SGLANG_TEXT)
    assert samples.total("sglang:num_running_reqs", tp_rank="1") == 3.0
    g = server_gauges(parse_text("# TYPE smg_worker_pool_size gauge\nsmg_worker_pool_size 2\n"))
    assert g.running is None and not g.has_load_gauges and g.in_system == 0.0


def test_malformed_text_is_a_clear_error() -> None:
    with pytest.raises(MetricsParseError, match="invalid Prometheus text"):
        parse_text("sglang:num_running_reqs{engine_type=decode} x y z\n")


def test_decode_graph_memory_is_the_per_gpu_total_of_the_decode_phase() -> None:
    text = "# TYPE sglang:graph_memory_usage_gb gauge\n" + "".join(
        f'sglang:graph_memory_usage_gb{{engine_type="decode",model_name="dsv4",moe_ep_rank="0",'
        f'phase="{phase}",pp_rank="0",tp_rank="{rank}"}} {gb}\n'
        for rank in (0, 1)
        for phase, gb in (("prefill", 0.0), ("decode", 0.31 + rank / 100))
    )
    g = server_gauges(parse_text(SGLANG_TEXT + text))
    assert g.decode_graph_memory_gb == pytest.approx(0.32)  # each GPU holds its own: max, not sum
    assert server_gauges(parse_text(SGLANG_TEXT)).decode_graph_memory_gb is None


# Real /metrics bodies of SGLang 0.5.23 (decode and prefill, PD, this machine's CPU build).
OBSERVED = sorted(
    (Path(__file__).resolve().parents[2] / "tools/sglang-cpu/observed").rglob("*_metrics*.txt")
)
_BODIES = {str(p.relative_to(p.parents[2])): p.read_text(encoding="utf-8") for p in OBSERVED}
# sample name -> its family, as prometheus_client's own parser groups them
_FAMILY = {
    name: {s.name: f.name for f in text_string_to_metric_families(body) for s in f.samples}
    for name, body in _BODIES.items()
}
_WHOLE = {name: parse_text(body) for name, body in _BODIES.items()}
_NOISE = st.one_of(
    st.builds(
        lambda n, v: f'other:series_total{{request_id="{n}"}} {v}\n',
        st.integers(0, 10**6),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    st.sampled_from(
        [
            "# TYPE other:series counter\n",
            "# HELP other:h Not watched. With {braces} and 1 2 3\n",
            "other:broken{ this is not Prometheus\n",
            "# a free comment\n",
            "\n",
        ]
    ),
)


@settings(derandomize=True, max_examples=20, deadline=None)
@given(
    name=st.sampled_from(sorted(_BODIES)),
    pick=st.sets(st.integers(0, 200), max_size=12),
    noise=st.lists(st.tuples(st.integers(0, 2000), _NOISE), max_size=40),
)
def test_keeping_some_families_reads_them_exactly_as_the_full_parse_does(
    name: str, pick: set[int], noise: list[tuple[int, str]]
) -> None:
    """Whatever else a body carries (other families, malformed lines of theirs) and wherever it
    sits, the families kept read exactly as parsing the real body whole reads them."""
    families = sorted(set(_FAMILY[name].values()))
    keep = frozenset(families[i % len(families)] for i in pick)
    lines = _BODIES[name].splitlines(keepends=True)
    for at, line in sorted(noise, reverse=True):
        lines.insert(min(at, len(lines)), line)
    got = parse_text("".join(lines), keep)
    whole = _WHOLE[name]
    want = {n: v for n, v in whole.series.items() if _FAMILY[name][n] in keep}
    assert repr(got.series) == repr(want)  # repr: a NaN sample (SGLang has some) equals itself
    assert got.families == whole.families & keep


def test_the_observed_bodies_parse_whole() -> None:
    assert len(OBSERVED) >= 3 and all(whole.series for whole in _WHOLE.values())
