"""Where watch reads the deployed unit: the one place a target and its deployment become URLs.

Today's targets (local, ssh) are reached through the target agent, so the URLs are those the
target itself uses (`Component.url`, a wildcard bind over loopback). A target kind that is only
an endpoint (a cluster's router URL and its workers' metrics URLs, being added to
profiles/targets.py) plugs in here: it returns its own URLs and `via="operator"`, and the caller
binds the HTTP client accordingly (canary-style, from this machine).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dsv4ops.apikey import auth_headers
from dsv4ops.deployment import WORKERS, Deployment
from dsv4ops.profiles.model import Target
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind


@dataclass(frozen=True)
class WatchEndpoints:
    router_url: str  # the OpenAI-compatible API the probes go through
    router_metrics_url: str
    metrics: dict[str, str]  # worker name -> /metrics
    health: dict[str, str]  # worker name -> /health
    model: str  # the name probe requests ask for
    decode_buckets: tuple[int, ...]  # captured decode graph batch sizes, if the profile says
    via: str = "target"  # "target": HTTP from the target (agent); "operator": from this machine
    # what the probes send the router besides their own (its API key, when it requires one)
    router_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    # whose metric names the router's /metrics are read by (an endpoint target: 0.3.2's)
    router_kind: RouterKind = DEFAULT_ROUTER_KIND


def watch_endpoints(target: Target, deployment: Deployment) -> WatchEndpoints:
    """The URLs watch needs for `deployment` running on `target` (a profiles.Target)."""
    del target  # local and ssh targets: everything is in the deployment, reached from the target
    router = deployment.component("router")
    workers = deployment.in_order(WORKERS)
    return WatchEndpoints(
        router_url=router.url(),
        router_metrics_url=f"http://{router.probe_host}:{router.metrics_port}/metrics",
        metrics={c.name: f"http://{c.probe_host}:{c.metrics_port}/metrics" for c in workers},
        health={c.name: c.url("/health") for c in workers},
        model=deployment.model_name,
        decode_buckets=captured_buckets(deployment),
        router_headers=auth_headers(deployment.router_key),
        router_kind=deployment.router_kind,
    )


# SGLang 0.5.23 flags that keep the decode from capturing any CUDA graph: every pass is eager by
# design, so there is no bucket to fall back from (the tiny-cpu profile runs this way).
NO_DECODE_GRAPHS = ("--disable-cuda-graph", "--disable-decode-cuda-graph")


def captured_buckets(deployment: Deployment) -> tuple[int, ...]:
    """The decode's captured graph batch sizes: the profile's buckets, none when its command
    line disables the decode's CUDA graphs (the rendered buckets are then unused)."""
    argv = deployment.component("decode").argv
    if any(flag in argv for flag in NO_DECODE_GRAPHS):
        return ()
    return deployment.decode_buckets


def cluster_watch_endpoints(
    router_url: str,
    router_metrics_url: str,
    prefill_urls: tuple[str, ...],
    decode_urls: tuple[str, ...],
    *,
    model: str,
    decode_buckets: tuple[int, ...] = (),
) -> WatchEndpoints:
    """The URLs of an endpoint target (a cluster), reached from this machine (`via="operator"`).

    Watch judges one prefill and one decode (the detectors read the servers "prefill" and
    "decode"): with N:N replicas, the first of each the target lists.
    """
    metrics = {}
    health = {}
    for name, urls in (("prefill", prefill_urls), ("decode", decode_urls)):
        if urls:
            metrics[name] = f"{urls[0].rstrip('/')}/metrics"
            health[name] = f"{urls[0].rstrip('/')}/health"
    return WatchEndpoints(
        router_url=router_url.rstrip("/"),
        router_metrics_url=router_metrics_url,
        metrics=metrics,
        health=health,
        model=model,
        decode_buckets=decode_buckets,
        via="operator",
    )
