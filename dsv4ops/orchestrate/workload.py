"""Running/queued requests on the workers, read from their Prometheus /metrics.

Used by the drain (wait until in-flight work is done before stopping a worker) and by status.
Parsed with prometheus_client's own text parser, so the exposition format is handled exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES
from dsv4ops.remote.results import HttpReply, HttpRequest

RUNNING = "sglang:num_running_reqs"
QUEUED = "sglang:num_queue_reqs"
# The decode's progress counter: it moves while the decode generates; running > 0 with it frozen
# is a wedge (the gauges keep their last values; docs/monitoring.md).
DECODE_TOKENS = "sglang:realtime_tokens_total"


@dataclass(frozen=True)
class Load:
    running: float | None  # None: metrics unavailable
    queued: float | None
    error: str | None = None
    decode_tokens: float | None = None  # realtime_tokens_total{mode="decode"}, when exported

    @property
    def busy(self) -> bool:
        """Known to have work. False for an unknown load too: check `known` before calling
        anything idle (the drain reports unknown as UNKNOWN, status prints "?")."""
        return bool(self.running) or bool(self.queued)

    @property
    def known(self) -> bool:
        return self.running is not None


def parse_load(text: str) -> Load:
    """Sum of running and queued requests over all scheduler ranks in one /metrics page."""
    sums: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if name == DECODE_TOKENS and sample.labels.get("mode") != "decode":
                    continue
                if name in (RUNNING, QUEUED, DECODE_TOKENS):
                    sums[name] = sums.get(name, 0.0) + float(sample.value)
    except ValueError as exc:
        return Load(None, None, f"unparsable metrics: {exc}")
    if RUNNING not in sums:
        return Load(None, None, f"no {RUNNING} in metrics")
    return Load(sums.get(RUNNING), sums.get(QUEUED, 0.0), decode_tokens=sums.get(DECODE_TOKENS))


def metrics_request(url: str, timeout_s: float) -> HttpRequest:
    """A worker's /metrics read, capped at METRICS_READ_CAP_BYTES (status, the drain)."""
    return {"url": url, "timeout_s": timeout_s, "max_bytes": METRICS_READ_CAP_BYTES}


def load_of(reply: HttpReply) -> Load:
    """The load one /metrics reply reports (its error when it is not a 200, or was longer than
    the cap: unknown, never idle)."""
    if reply.oversized:
        return Load(
            None, None, f"/metrics longer than {METRICS_READ_CAP_BYTES >> 20} MiB: not read"
        )
    if reply.status != 200:
        return Load(None, None, reply.error or f"HTTP {reply.status}")
    return parse_load(reply.body)
