"""What the simulated scheduler publishes to /metrics, and when: SGLang 0.5.23's MetricsReporter.

On the box the scheduler gauges are `Gauge(multiprocess_mode="mostrecent")`: a scrape reads what
the scheduler loop last *logged*, not the live state (`srt/observability/metrics_collector.py`
L363-395, `log_stats` L1646). The loop logs them

* on a decode iteration whose cumulative count is a multiple of `--decode-log-interval`
  (`metrics_reporter.py` L933-944; gen_throughput = tokens since the last log / wall gap),
* on every prefill batch (`report_prefill_stats`, L719-899),
* when fully idle, if the running gauge disagrees with the true running count or the last log is
  30 s old (`_maybe_log_idle_metrics`, L1476-1540: running = the true count, gen_throughput = 0),

and nothing else. A loop that is blocked (a TP rank spinning in a collective: the seeds' wedge)
logs nothing, so rank 0's gauges freeze at their last values. `sglang:realtime_tokens_total` is
a counter bumped by every decode iteration (`report_decode_stats` L909-916, before the interval
check) and every prefill batch; the twin can also bump it only at the log interval (the counter's
own help text, "updated on each log interval", L1032-1039) to rehearse the worst case.

`sglang:scheduler_idle_seconds_total` (metrics_collector.py L1062-1068, registered at 0) adds the
wall time the loop spent fully idle: the loop samples idle/active on every pass (idle path:
`record_scheduler_idle`, a batch or a non-idle pass: `record_scheduler_active`, scheduler.py
L2219, L4620, L5256-5333) and flushes the sum at the first sample at least 1 s after the last
flush (metrics_reporter.py L1384-1430, `_SCHEDULER_TIME_ACCOUNTING_INTERVAL_NS`). A blocked loop
samples nothing, so the counter stands still in a wedge, whichever side rank 0 is on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .config import TwinConfig

IDLE_REPUBLISH_S = 30.0  # model seconds (metrics_reporter.py L1497)
IDLE_ACCOUNTING_FLUSH_S = 1.0  # wall seconds on the box (metrics_reporter.py L76)
MODES = ("prefill_compute", "prefill_cache", "decode")


@dataclass(frozen=True)
class SchedStats:
    """One `log_stats` call: the gauge values a scrape shows until the next one."""

    running: int = 0
    queued: int = 0
    gen_throughput: float = 0.0
    token_usage: float = 0.0
    prefill_bootstrap_queue: int = 0
    prefill_inflight_queue: int = 0
    decode_prealloc_queue: int = 0
    decode_transfer_queue: int = 0


class StatsReporter:
    """Rank 0's metrics reporter. `live()` is the scheduler's state right now (what a log would
    publish); `fully_idle()` is `Scheduler.is_fully_idle` (nothing running or in any queue)."""

    def __init__(
        self,
        config: TwinConfig,
        *,
        decode_log_interval: int,
        live: Callable[[], SchedStats],
        fully_idle: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.decode_log_interval = decode_log_interval
        self._live = live
        self._fully_idle = fully_idle
        self._now = clock
        self.published = SchedStats()
        self.logs = 0  # how many times the gauges were published (for tests and /_twin/state)
        self.realtime_tokens = dict.fromkeys(MODES, 0)
        # sglang:cuda_graph_passes_total by mode (decode_cuda_graph|decode_none|prefill_none):
        # bumped every forward pass, not at the log interval (batch_result_processor.py L994)
        self.graph_passes: dict[str, int] = {}
        self.forward_ct_decode = 0
        self._pending_decode_tokens = 0  # per-log-interval cadence: held until the next log
        self._generated_since_log = 0
        self._last_log_at = self._now()
        self._last_decode_log_at = self._last_log_at
        self._last_gen_throughput = 0.0
        self.idle_seconds = 0.0  # sglang:scheduler_idle_seconds_total, model seconds
        self._acct: tuple[float, float, bool] | None = None  # flushed at, sampled at, was idle
        self._acct_idle_s = 0.0  # wall seconds idle since the last flush

    def live(self) -> SchedStats:
        return self._live()

    @property
    def last_gen_throughput(self) -> float:
        return self._last_gen_throughput

    def _log(self, stats: SchedStats) -> None:
        self.published = stats
        self.logs += 1
        self._last_log_at = self._now()

    def start(self) -> None:
        """The first publish when the server is ready (after the warmup request's report)."""
        self._log(replace(self._live(), gen_throughput=0.0))
        now = self._now()
        self._acct = (now, now, True)  # start_scheduler_time_accounting: idle from the start

    def _sample(self, idle: bool) -> None:
        """`_record_scheduler_time`: the time since the last sample counts as idle if that
        sample was; the sum goes to the counter once a flush interval has passed."""
        if self._acct is None:
            return
        flushed, last, was_idle = self._acct
        now = self._now()
        if was_idle:
            self._acct_idle_s += now - last
        if now - flushed >= self.config.wall(IDLE_ACCOUNTING_FLUSH_S):
            self.idle_seconds += self._acct_idle_s / self.config.time_scale
            self._acct_idle_s = 0.0
            flushed = now
        self._acct = (flushed, now, idle)

    # --- decode --------------------------------------------------------------------------
    def decode_step(self, produced: int, *, batch_size: int, cuda_graph: bool = True) -> None:
        """One decode iteration of `batch_size` requests that produced `produced` tokens
        (report_decode_stats; the running gauge is the batch that ran, finished ones included).
        `cuda_graph`: the batch ran a captured graph (False above the largest bucket: eager)."""
        self._sample(False)
        mode = "decode_cuda_graph" if cuda_graph else "decode_none"
        self.graph_passes[mode] = self.graph_passes.get(mode, 0) + 1
        if self.config.realtime_tokens == "per_log_interval":
            self._pending_decode_tokens += produced
        else:
            self.realtime_tokens["decode"] += produced
        self._generated_since_log += produced
        self.forward_ct_decode = (self.forward_ct_decode + 1) % (1 << 30)
        if self.forward_ct_decode % self.decode_log_interval != 0:
            return
        now = self._now()
        gap_model_s = (now - self._last_decode_log_at) / self.config.time_scale
        self._last_decode_log_at = now
        self._last_gen_throughput = (
            self._generated_since_log / gap_model_s if gap_model_s > 0 else 0.0
        )
        self._generated_since_log = 0
        self.realtime_tokens["decode"] += self._pending_decode_tokens
        self._pending_decode_tokens = 0
        self._log(
            replace(self._live(), running=batch_size, gen_throughput=self._last_gen_throughput)
        )

    # --- prefill -------------------------------------------------------------------------
    def prefill_batch(self, compute_tokens: int, cache_tokens: int = 0) -> None:
        """One prefill batch (report_prefill_stats): counters, then every gauge. Its graph pass
        is `prefill_none`: 0.5.23 runs prefill without a graph unless piecewise graphs are on."""
        self._sample(False)
        self.graph_passes["prefill_none"] = self.graph_passes.get("prefill_none", 0) + 1
        self.realtime_tokens["prefill_compute"] += compute_tokens
        self.realtime_tokens["prefill_cache"] += cache_tokens
        now = self._now()
        # _current_gen_throughput: the last decode value, decayed to 0 after 30 s without one
        if (now - self._last_decode_log_at) > self.config.wall(IDLE_REPUBLISH_S):
            self._last_gen_throughput = 0.0
        self._log(replace(self._live(), gen_throughput=self._last_gen_throughput))

    # --- idle ----------------------------------------------------------------------------
    def on_idle(self, rank0_view: SchedStats | None = None) -> bool:
        """`_maybe_log_idle_metrics`, called by a loop that found no batch to run. Publishes the
        idle values when the running gauge is stale or the last log is 30 s old; returns whether
        it did. `rank0_view` replaces the live state when rank 0 sees less than the twin holds
        (a rank that dropped its batch while the others still hold it). That rank's loop then
        blocks in its next TP broadcast (docs/twin.md), so it samples no idle time."""
        if rank0_view is None:
            if not self._fully_idle():
                self._sample(False)
                return False
            self._sample(True)
            view = self._live()
        else:
            view = rank0_view
            if view.running or view.queued or view.decode_transfer_queue:
                return False
        stale = self.published.running != view.running
        old = self._now() > self._last_log_at + self.config.wall(IDLE_REPUBLISH_S)
        if not (stale or old):
            return False
        self._log(replace(view, gen_throughput=0.0))
        return True
