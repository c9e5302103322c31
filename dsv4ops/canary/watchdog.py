"""Hang watchdog: a live task that classifies hangs while a suite runs.

Three cases are kept apart (reference load-generators.md §5.1, §6 G5):
* `no_first_token`: a request got no output within the first-token deadline (queueing or a lost
  KV transfer);
* `stall`: a stream that had output went silent mid-response for `stall_s`;
* `freeze`: server-wide — requests in flight and no bytes on *any* stream for `freeze_s`;
* `freeze_metrics`: the same seen in a decode's own metrics — work admitted (running or queued
  > 0) and its progress counter `realtime_tokens_total{mode="decode"}` standing still for longer
  than a healthy server goes between bumps (`progress.py`). Never from `gen_throughput`: on
  SGLang 0.5.23 a wedged (blocked) scheduler keeps exporting its last, non-zero value.
At the defaults (2 s, ticking every 0.1 s) a stall or freeze is detected about 2.1 s after the
last byte, far below SGLang's 300 s timeouts and the 6 h client timeouts of existing tools; the
metrics confirm a wedge within two decode log intervals. Each detection records its latency
(detection time − time the silence began).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from dsv4ops.canary.progress import DEFAULT_DECODE_LOG_INTERVAL, ProgressDetector
from dsv4ops.canary.records import RequestRecord
from dsv4ops.clock import perf_ns
from dsv4ops.metrics.prom import ServerGauges

NO_FIRST_TOKEN = "no_first_token"
STALL = "stall"
FREEZE = "freeze"
FREEZE_METRICS = "freeze_metrics"


class HangEventRecord(TypedDict):
    """A hang as report.json lists it (HangEvent.to_json)."""

    kind: str
    rid: str | None
    detection_latency_s: float
    detail: str


@dataclass(frozen=True)
class HangEvent:
    kind: str
    rid: str | None
    since_ns: int
    detected_ns: int
    detail: str

    @property
    def detection_latency_s(self) -> float:
        return (self.detected_ns - self.since_ns) / 1e9

    def to_json(self) -> HangEventRecord:
        return {
            "kind": self.kind,
            "rid": self.rid,
            "detection_latency_s": round(self.detection_latency_s, 3),
            "detail": self.detail,
        }


class Watchdog:
    """Register streams as they start; the background task flags hangs and can cut them."""

    def __init__(
        self,
        *,
        first_token_deadline_s: float = 60.0,
        stall_s: float = 2.0,
        freeze_s: float = 2.0,
        tick_s: float = 0.1,
        cut_after_s: float | None = None,
        decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL,
        clock_ns: Callable[[], int] = perf_ns,
    ) -> None:
        self.first_token_deadline_ns = int(first_token_deadline_s * 1e9)
        self.stall_ns = int(stall_s * 1e9)
        self.freeze_ns = int(freeze_s * 1e9)
        self.tick_s = tick_s
        # A flagged stream is cancelled this long after detection, so a suite stays bounded.
        self.cut_ns = int((cut_after_s if cut_after_s is not None else stall_s) * 1e9)
        self._now = clock_ns
        self.active: dict[str, tuple[RequestRecord, asyncio.Task[object] | None]] = {}
        self.events: list[HangEvent] = []
        self.frozen = asyncio.Event()
        self._flagged: dict[str, int] = {}  # rid → detection time
        self._last_progress = 0  # last bytes on any stream (including finished ones)
        self._inflight_since = 0
        self._seen_output = False
        self._freeze_open = False
        self._freeze_at = 0
        self.progress = ProgressDetector(
            min_window_s=freeze_s, decode_log_interval=decode_log_interval
        )
        self._metrics_freeze_open: set[str] = set()
        self._metrics_freeze_at = 0
        self._task: asyncio.Task[None] | None = None

    # -- registry (called by the load generator) --------------------------------------------
    def register(self, rec: RequestRecord, task: asyncio.Task[object] | None) -> None:
        if not self.active:
            self._inflight_since = self._now()
        self.active[rec.rid] = (rec, task)

    def unregister(self, rec: RequestRecord) -> None:
        self.active.pop(rec.rid, None)
        self._flagged.pop(rec.rid, None)
        if rec.t_last > self._last_progress:
            self._last_progress = rec.t_last
        if rec.t_first:
            self._seen_output = True

    # -- metrics (called by the metrics sampler) ------------------------------------------------
    def observe_metrics(self, url: str, gauges: ServerGauges) -> HangEvent | None:
        """One scrape of a worker: confirms a freeze when its decode stopped making progress."""
        now = self._now()
        stall = self.progress.observe(
            url,
            now,
            running=gauges.running,
            queued=gauges.queued,
            decode_tokens=gauges.decode_tokens,
            engine_types=gauges.engine_types,
            in_flight=len(self.active),
        )
        if stall is None:
            if not self.progress.is_open(url):
                self._metrics_freeze_open.discard(url)  # progress again: a new episode may open
            return None
        if not self._metrics_freeze_open:
            self._metrics_freeze_at = now
        self._metrics_freeze_open.add(url)
        self.frozen.set()
        return self._record(
            FREEZE_METRICS,
            None,
            stall.since_ns,
            now,
            f"{url}: {stall.running:.0f} running, {stall.queued:.0f} queued, no decode progress "
            f"(realtime_tokens_total) for {(now - stall.since_ns) / 1e9:.1f} s "
            f"(window {stall.window_s:.1f} s)",
        )

    # -- the check ----------------------------------------------------------------------------
    def check(self) -> list[HangEvent]:
        """One pass over the active streams; returns the events detected in this pass."""
        now = self._now()
        new: list[HangEvent] = []
        last_any = self._last_progress
        for rid, (rec, task) in list(self.active.items()):
            if rec.t_last > last_any:
                last_any = rec.t_last
            if rec.t_first:
                self._seen_output = True
            flagged_at = self._flagged.get(rid)
            if flagged_at is not None:
                if task is not None and not task.done() and now - flagged_at >= self.cut_ns:
                    task.cancel()
                continue
            if not rec.t_send:
                continue
            if not rec.t_first:
                if now - rec.t_send >= self.first_token_deadline_ns:
                    new.append(
                        self._flag(
                            NO_FIRST_TOKEN,
                            rec,
                            rec.t_send,
                            now,
                            f"no output {(now - rec.t_send) / 1e9:.1f} s after send",
                        )
                    )
            elif now - rec.t_last >= self.stall_ns:
                new.append(
                    self._flag(
                        STALL,
                        rec,
                        rec.t_last,
                        now,
                        f"silent {(now - rec.t_last) / 1e9:.1f} s after "
                        f"{len(rec.times)} events",
                    )
                )
        if self.active:
            since = max(last_any, self._inflight_since)
            limit = self.freeze_ns if self._seen_output else self.first_token_deadline_ns
            if now - since >= limit and not self._freeze_open:
                self._freeze_open = True
                self._freeze_at = now
                new.append(
                    self._record(
                        FREEZE,
                        None,
                        since,
                        now,
                        f"{len(self.active)} requests in flight, no bytes on any "
                        f"stream for {(now - since) / 1e9:.1f} s",
                    )
                )
                self.frozen.set()
            elif now - since < limit:
                self._freeze_open = False
            if self._freeze_open and now - self._freeze_at >= self.cut_ns:
                self._cut_all(FREEZE)
            # The server's own metrics say it is frozen: its streams will not answer either. Without
            # this, requests that never got a first token would wait out the first-token deadline
            # (60 s by default) after a freeze was already detected in 2 s.
            elif self._metrics_freeze_open and now - self._metrics_freeze_at >= self.cut_ns:
                self._cut_all(FREEZE_METRICS)
        return new

    def _cut_all(self, kind: str) -> None:
        """A frozen server will not answer: cancel every open stream so the suite ends."""
        for rec, task in self.active.values():
            rec.extra.setdefault("hang", kind)
            if task is not None and not task.done():
                task.cancel()

    def _flag(self, kind: str, rec: RequestRecord, since: int, now: int, detail: str) -> HangEvent:
        self._flagged[rec.rid] = now
        rec.extra.setdefault("hang", kind)
        return self._record(kind, rec.rid, since, now, detail)

    def _record(self, kind: str, rid: str | None, since: int, now: int, detail: str) -> HangEvent:
        event = HangEvent(kind, rid, since, now, detail)
        self.events.append(event)
        return event

    # -- lifecycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> Watchdog:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            self.check()

    def summary(self) -> dict[str, object]:
        by_kind: dict[str, int] = {}
        for e in self.events:
            by_kind[e.kind] = by_kind.get(e.kind, 0) + 1
        return {
            "hangs_by_kind": by_kind,
            # what the metrics freeze window was sized for (the decode's --decode-log-interval)
            "decode_log_interval": self.progress.decode_log_interval,
            "max_detection_latency_s": max(
                (e.detection_latency_s for e in self.events), default=None
            ),
            "events": [e.to_json() for e in self.events[:50]],
        }
