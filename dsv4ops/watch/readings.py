"""One scrape of the PD unit turned into numbers: per server and for the router.

A body is read up to METRICS_READ_CAP_BYTES, and only the families watch reads
(WATCHED_FAMILIES) are parsed, by prometheus_client's own parser (`metrics.prom`). The servers'
gauges are last-published values (SGLang's reporter writes them at the decode log interval,
never while a scheduler is blocked), so detection reads them together with counters that move
every iteration: `realtime_tokens_total` (progress), the PD failure counters and
`cuda_graph_passes_total` (0.5.23 `metrics_collector.py` L737, bumped every forward pass).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsv4ops.metrics.prom import (
    METRICS_READ_CAP_BYTES,
    QUEUED,
    REALTIME_TOKENS,
    REALTIME_TOKENS_TOTAL,
    RUNNING,
    MetricsParseError,
    Samples,
    parse_text,
)
from dsv4ops.remote.results import HttpReply
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind

TRANSFER_FAILED = "sglang:num_transfer_failed_reqs_total"
BOOTSTRAP_FAILED = "sglang:num_bootstrap_failed_reqs_total"
GRAPH_PASSES = "sglang:cuda_graph_passes_total"
QUEUES = {  # short name -> gauge (the PD queues of 0.5.23's scheduler stats)
    "bootstrap": "sglang:num_prefill_bootstrap_queue_reqs",
    "inflight": "sglang:num_prefill_inflight_queue_reqs",
    "prealloc": "sglang:num_decode_prealloc_queue_reqs",
    "transfer": "sglang:num_decode_transfer_queue_reqs",
}
# The router's families, by router kind (routerkind.py maps them; sglang-router 0.3.2 and SMG
# 1.13.0 share these names).
ROUTER_FAMILIES = frozenset(
    name
    for kind in RouterKind
    for name in (kind.metrics.responses.removesuffix("_total"), kind.metrics.worker_health)
)
# The families a reading is made of (a counter's without `_total`): every other line of a body
# is skipped before parsing, so 10^6 series of something else are never 10^6 objects.
WATCHED_FAMILIES = frozenset(
    {
        RUNNING,
        QUEUED,
        REALTIME_TOKENS,
        TRANSFER_FAILED.removesuffix("_total"),
        BOOTSTRAP_FAILED.removesuffix("_total"),
        GRAPH_PASSES.removesuffix("_total"),
        *QUEUES.values(),
        *ROUTER_FAMILIES,
    }
)


@dataclass(frozen=True)
class ServerReading:
    name: str  # prefill | decode
    error: str | None = None  # why there are no numbers (no answer, HTTP status, bad text)
    timed_out: bool = False  # no answer in time (HttpReply.timed_out): not a refusal
    oversized: str | None = None  # the /metrics URL that sent more than METRICS_READ_CAP_BYTES
    health: int | None = None  # /health status (None: no answer or not asked)
    running: float | None = None
    queued: float | None = None
    progress: float | None = None  # realtime_tokens_total, every mode (this server's work)
    decode_tokens: float | None = None  # realtime_tokens_total{mode="decode"}
    transfer_failed: float = 0.0
    bootstrap_failed: float = 0.0
    queues: dict[str, float] = field(default_factory=dict)
    eager_passes: float | None = None  # cuda_graph_passes_total{mode="decode_none"}
    graph_passes: float | None = None  # cuda_graph_passes_total{mode="decode_cuda_graph"}

    @property
    def up(self) -> bool:
        return self.error is None

    @property
    def failures(self) -> float:
        return self.transfer_failed + self.bootstrap_failed

    def waiting_in_pd_queues(self) -> float:
        return sum(self.queues.values())


@dataclass(frozen=True)
class RouterReading:
    error: str | None = None
    timed_out: bool = False  # as ServerReading's
    oversized: str | None = None  # as ServerReading's
    responses_5xx: float = 0.0
    worker_health: dict[str, float] = field(default_factory=dict)  # worker URL -> 1 | 0

    @property
    def up(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Scrape:
    """Everything one round read, stamped with the watch clock's monotonic time."""

    at: float
    servers: dict[str, ServerReading]
    router: RouterReading


def _samples(reply: HttpReply) -> tuple[Samples | None, str | None]:
    if reply.status is None:
        return None, f"no answer ({reply.error or 'connection failed'})"
    if reply.status != 200:
        return None, f"/metrics HTTP {reply.status}"
    if reply.oversized:
        return None, f"/metrics sent more than {mib(METRICS_READ_CAP_BYTES)}: not read"
    try:
        samples = parse_text(reply.body, WATCHED_FAMILIES)
        if not samples.families and reply.body.strip():
            # none of SGLang's families: is the body Prometheus text at all? (within the read
            # cap; a proxy's error page is no worker's metrics, and says so)
            parse_text(reply.body)
        return samples, None
    except MetricsParseError as exc:
        return None, str(exc)[:200]


def mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def _timed_out(reply: HttpReply) -> bool:
    return reply.status is None and reply.timed_out


def _oversized(reply: HttpReply, url: str) -> str | None:
    return (url or "its /metrics") if reply.status == 200 and reply.oversized else None


def server_reading(
    name: str, metrics: HttpReply, health: HttpReply | None = None, *, url: str = ""
) -> ServerReading:
    """`url`: where `metrics` was read (named by a finding when it sent too much)."""
    samples, error = _samples(metrics)
    health_status = health.status if health is not None else None
    if samples is None:
        return ServerReading(
            name,
            error=error,
            timed_out=_timed_out(metrics),
            oversized=_oversized(metrics, url),
            health=health_status,
        )
    decode = samples.total(REALTIME_TOKENS_TOTAL, mode="decode")
    progress = samples.total(REALTIME_TOKENS_TOTAL)
    if REALTIME_TOKENS in samples.families:  # declared, no child yet: nothing processed so far
        decode = 0.0 if decode is None else decode
        progress = 0.0 if progress is None else progress
    graph_family = "sglang:cuda_graph_passes" in samples.families
    return ServerReading(
        name,
        health=health_status,
        running=samples.total(RUNNING),
        queued=samples.total(QUEUED),
        progress=progress,
        decode_tokens=decode,
        transfer_failed=samples.total(TRANSFER_FAILED) or 0.0,
        bootstrap_failed=samples.total(BOOTSTRAP_FAILED) or 0.0,
        queues={k: v for k, g in QUEUES.items() if (v := samples.total(g)) is not None},
        eager_passes=(samples.total(GRAPH_PASSES, mode="decode_none") or 0.0)
        if graph_family
        else None,
        graph_passes=(samples.total(GRAPH_PASSES, mode="decode_cuda_graph") or 0.0)
        if graph_family
        else None,
    )


def router_reading(
    metrics: HttpReply, *, url: str = "", router: RouterKind = DEFAULT_ROUTER_KIND
) -> RouterReading:
    """The router's numbers; its 5xx are those clients got (SMG: not its own probe answers)."""
    names = router.metrics
    samples, error = _samples(metrics)
    if samples is None:
        return RouterReading(
            error=error, timed_out=_timed_out(metrics), oversized=_oversized(metrics, url)
        )
    five = sum(
        v for labels, v in samples.series.get(names.responses, ()) if names.is_client_5xx(labels)
    )
    health = {
        labels.get("worker", "?"): v for labels, v in samples.series.get(names.worker_health, ())
    }
    return RouterReading(responses_5xx=five, worker_health=health)
