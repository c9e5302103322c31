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
    assert e.metrics == {"prefill": f"http://127.0.0.1:{pre.port}/metrics",
                         "decode": f"http://127.0.0.1:{dec.port}/metrics"}
    assert e.health["decode"] == f"http://127.0.0.1:{dec.port}/health"
    assert e.decode_buckets == d.decode_buckets and e.model == d.model_name and e.via == "target"
