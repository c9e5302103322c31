"""Server-side wedge confirmation from signals that are true on the box: a decode that has work
(running or queued > 0) whose progress counter `sglang:realtime_tokens_total{mode="decode"}` does
not move for longer than a healthy server can go between two bumps.

What it never uses: `sglang:gen_throughput`. On SGLang 0.5.23 it is a mostrecent gauge published
by the scheduler loop; a blocked loop (the seeds' wedge) keeps exporting its last value (> 0), and
an idle loop publishes 0. Neither value says "wedged".

How long "longer than healthy" is depends on how often the counter moves:

* SGLang 0.5.23 bumps it on every decode iteration (metrics_reporter.py L909-916). Then a busy
  server moves it between any two scrapes, and a silence of `min_window_s` (well above a scrape
  interval) is a wedge. The detector *infers* this cadence: three changes in a row each smaller
  than half a log interval's worth of tokens (running x decode_log_interval / 2).
* Until then (or on a server that bumps only every `--decode-log-interval` iterations, as the
  counter's help text says) a bump may be a whole log interval apart: 40 iterations of 80 ms at 60
  running is 3.2 s. The window is then 1.5x the longest gap seen between bumps while busy, scaled
  up when the canary has more requests in flight than the running gauge showed at the last bump
  (a bigger batch takes longer per step), and 1.5 x decode_log_interval x 0.1 s before any gap is
  known. So a window never ends inside one log interval of a healthy server, and a wedge is
  confirmed at most ~1.5 log intervals (+ one scrape) after the last bump: within two.

Only decode and unified servers are judged: a PD prefill's counter moves with prefill batches,
not periodically, and its running gauge keeps the last batch until it is fully idle.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dsv4ops.constants import SGLANG_DEFAULT_DECODE_LOG_INTERVAL

# SGLang's default; a caller that knows the deployed decode passes its real value (a window sized
# for 40 iterations ends inside one log interval of a decode run with a larger one).
DEFAULT_DECODE_LOG_INTERVAL = SGLANG_DEFAULT_DECODE_LOG_INTERVAL
FALLBACK_STEP_S = 0.1  # a DSV4 decode step at ~80 running, before any gap was measured
WINDOW_FACTOR = 1.5
PER_ITERATION_EVIDENCE = 3  # consecutive small changes that prove per-iteration bumping
RECENT_GAPS = 4


@dataclass
class _Track:
    value: float
    changed_ns: int
    running_at_change: float
    busy_since_ns: int | None = None
    gaps_ns: deque[int] = field(default_factory=lambda: deque(maxlen=RECENT_GAPS))
    small_changes: int = 0
    per_iteration: bool = False
    open: bool = False


@dataclass(frozen=True)
class Stall:
    """A confirmed no-progress episode on one server."""

    url: str
    since_ns: int
    detected_ns: int
    running: float
    queued: float
    window_s: float


class ProgressDetector:
    def __init__(
        self, *, min_window_s: float = 2.0, decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL
    ) -> None:
        self.min_window_ns = int(min_window_s * 1e9)
        self.decode_log_interval = max(1, decode_log_interval)
        self._tracks: dict[str, _Track] = {}

    def is_open(self, url: str) -> bool:
        """Whether `url` is in a confirmed stall that has not ended yet."""
        t = self._tracks.get(url)
        return bool(t and t.open)

    def window_ns(self, url: str, in_flight: int = 0) -> int:
        """How long the counter may stand still on `url` before that is a stall."""
        t = self._tracks.get(url)
        if t is None:
            return int(WINDOW_FACTOR * self.decode_log_interval * FALLBACK_STEP_S * 1e9)
        longest = max(t.gaps_ns, default=0)
        if t.per_iteration:
            return max(self.min_window_ns, int(WINDOW_FACTOR * longest))
        if not t.gaps_ns:
            interval = self.decode_log_interval * FALLBACK_STEP_S * 1e9
        else:
            # more requests than the last report showed: a longer step, a longer log interval
            interval = longest * max(1.0, in_flight / max(t.running_at_change, 1.0))
        return max(self.min_window_ns, int(WINDOW_FACTOR * interval))

    def observe(
        self,
        url: str,
        now_ns: int,
        *,
        running: float | None,
        queued: float | None,
        decode_tokens: float | None,
        engine_types: tuple[str, ...] = (),
        in_flight: int = 0,
    ) -> Stall | None:
        """One scrape of `url`; returns a Stall when this scrape confirms one (once per episode)."""
        if (
            running is None
            or decode_tokens is None
            or (engine_types and not set(engine_types) & {"decode", "unified"})
        ):
            self._tracks.pop(url, None)  # cannot judge this server
            return None
        busy = running > 0 or (queued or 0) > 0
        t = self._tracks.get(url)
        if t is None:
            self._tracks[url] = _Track(
                decode_tokens, now_ns, running, busy_since_ns=now_ns if busy else None
            )
            return None
        if decode_tokens != t.value:
            self._changed(t, now_ns, decode_tokens, running)
            t.busy_since_ns = now_ns if busy else None
            return None
        if not busy:
            t.busy_since_ns, t.open = None, False
            return None
        if t.busy_since_ns is None:
            t.busy_since_ns = now_ns
        since = max(t.changed_ns, t.busy_since_ns)
        window = self.window_ns(url, in_flight)
        if now_ns - since < window or t.open:
            return None
        t.open = True
        return Stall(url, since, now_ns, running, queued or 0.0, window / 1e9)

    def _changed(self, t: _Track, now_ns: int, value: float, running: float) -> None:
        if t.busy_since_ns is not None and t.busy_since_ns <= t.changed_ns:
            t.gaps_ns.append(now_ns - t.changed_ns)  # busy for the whole gap: a healthy gap
        # fewer tokens than half a log interval at this batch: the counter moves per iteration
        if running > 0 and value - t.value < running * self.decode_log_interval / 2:
            t.small_changes += 1
            t.per_iteration = t.per_iteration or t.small_changes >= PER_ITERATION_EVIDENCE
        else:
            t.small_changes = 0
        t.value, t.changed_ns, t.running_at_change, t.open = value, now_ns, running, False
