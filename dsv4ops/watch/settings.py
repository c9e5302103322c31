"""The windows watch judges by, in MODEL seconds (the box's time), and its throughput baseline.

`time_scale` turns model seconds into the wall seconds of a scaled twin, exactly as the alert
rules do (`monitoring.rules.RuleSettings`), and the wedge window is the rules' own: at least two
decode log intervals at the slowest step and four scrapes, because `realtime_tokens_total`
may move only once per log interval (its help text; 0.5.23's code moves it every iteration).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsv4ops.monitoring.rules import RuleSettings


@dataclass(frozen=True)
class Baseline:
    """The last canary's throughput at its load: output tok/s (client side) at `concurrency`."""

    tokens_per_s: float
    concurrency: int
    source: str  # where it was read (an op id and step)


@dataclass(frozen=True)
class WatchSettings:
    interval_s: float = 5.0  # between scrapes
    probe_every_s: float = 30.0
    probe_timeout_s: float = 20.0
    decode_log_interval: int = 40
    max_step_ms: float = 150.0
    failure_window_s: float = 300.0  # a failure stays reported this long after it was seen
    queue_stuck_s: float = 120.0
    # the decode's transfer queue held a request on every scrape this long: well past a healthy
    # transfer, well before SGLang's 300 s waiting timeout fails it (sglang#36033)
    kv_stuck_s: float = 60.0
    stalled_probes: int = 2  # consecutive stalled rounds that make a finding
    down_scrapes: int = 2  # consecutive failed scrapes that make a finding
    eager_window_s: float = 60.0
    max_decode_bucket: int | None = None  # the largest captured decode graph batch, if known
    throughput_window_s: float = 60.0
    throughput_min_ratio: float = 0.5  # below this share of the baseline at the same load
    load_tolerance: float = 0.25  # "the same load": mean running within 25 % of the canary's
    baseline: Baseline | None = None
    time_scale: float = 1.0
    # The profile's canary.tool_calls: off for a model that cannot echo a nonce (no tool probe)
    tool_calls: bool = True

    def wall(self, model_s: float) -> float:
        return model_s * self.time_scale

    def wedge_window_s(self) -> float:
        """Model seconds over which a decoding server's progress counter must move."""
        return RuleSettings(
            scrape_interval_s=self.interval_s,
            decode_log_interval=self.decode_log_interval,
            max_step_ms=self.max_step_ms,
        ).wedge_window_s()

    def detection_times_s(self) -> dict[str, float]:
        """Worst-case model seconds from the incident's first sign on /metrics (or its first
        probe) to the finding, as docs/monitoring.md states them."""
        batch = self.interval_s + self.probe_timeout_s  # a round that carries probes is longer
        return {
            "decode_wedged": self.wedge_window_s() + batch,
            "probe_stalled": self.stalled_probes * self.probe_every_s + self.probe_timeout_s,
            "pd_transfer_degraded": batch,
            "probe_failed_while_healthy": self.probe_every_s + self.probe_timeout_s,
            "queue_stuck": self.queue_stuck_s + batch,
            "kv_transfer_stuck": self.kv_stuck_s + batch,
            "eager_fallback": batch,
            "throughput_below_baseline": self.throughput_window_s + batch,
            "tool_call_corruption": self.probe_every_s + self.probe_timeout_s,
            "component_down": self.down_scrapes * batch,
            "worker_unhealthy": batch,
        }
