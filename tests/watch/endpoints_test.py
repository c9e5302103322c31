"""The URLs watch reads for a rendered deployment: from the target itself, where each process
binds (a wildcard bind over loopback), the router's /metrics on its Prometheus port."""

from __future__ import annotations

from dsv4ops.profiles import get_target, load_profile, render
from dsv4ops.watch import watch_endpoints


def test_the_twin_local_render_of_baseline() -> None:
    target = get_target("twin-local")
    d = render(load_profile("baseline"), target)
    e = watch_endpoints(target, d)
    pre, dec, router = (d.component(n) for n in ("prefill", "decode", "router"))
    assert e.router_url == f"http://127.0.0.1:{router.port}"
    assert e.router_metrics_url == f"http://127.0.0.1:{router.metrics_port}/metrics"
    assert router.metrics_port != router.port
    assert e.metrics == {
        "prefill": f"http://127.0.0.1:{pre.port}/metrics",
        "decode": f"http://127.0.0.1:{dec.port}/metrics",
    }
    assert e.health["decode"] == f"http://127.0.0.1:{dec.port}/health"
    assert e.decode_buckets == d.decode_buckets and e.model == d.model_name and e.via == "target"


def test_a_decode_without_cuda_graphs_has_no_bucket_to_fall_back_from() -> None:
    """tiny-cpu renders buckets but runs --disable-decode-cuda-graph: every pass is eager by
    design, and real SGLang on CPU counts each as decode_none; watch must not call that an
    eager fallback (it did, against the real server: 15 of 15 passes, a false WARNING)."""
    target = get_target("sglang-cpu")
    d = render(load_profile("tiny-cpu"), target)
    assert d.decode_buckets == (1, 2, 4, 8, 16)
    assert watch_endpoints(target, d).decode_buckets == ()
