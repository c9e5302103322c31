"""Findings from a sequence of scrapes and probe rounds: pure, clock-free (times come in).

Each detector keeps the little history it needs and answers "what is wrong now, and what did
I see". The servers' gauges are last-published (a blocked scheduler keeps running > 0 and
gen_throughput > 0), so nothing here judges by throughput gauges: a wedge is running > 0 while
the progress counter does not move for the wedge window; failures are counter rises (a count
already there at the first scrape is history, not news); a stalled probe is a wedge only when
the decode also stopped progressing (else the request was lost between prefill and decode).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES
from dsv4ops.secrets import redact_text
from dsv4ops.watch.findings import Basis, Finding
from dsv4ops.watch.probe import ProbeOutcome
from dsv4ops.watch.probe_tracker import ProbeTracker
from dsv4ops.watch.readings import Scrape, ServerReading, mib
from dsv4ops.watch.settings import WatchSettings
from dsv4ops.watch.stream import CONFIRM_GAP_S, SILENCE_S
from dsv4ops.watch.transfers import TransferWatch


@dataclass
class _Since:
    """When a condition started holding, and the counter value it holds at."""

    at: float
    value: float


class Detector:
    def __init__(self, settings: WatchSettings) -> None:
        self.s = settings
        self._frozen: _Since | None = None  # decode running > 0 at this counter value
        self._queue: dict[str, _Since] = {}
        self._last_failures: dict[str, float] = {}
        self._fail_seen: dict[str, tuple[float, str]] = {}  # component -> (at, evidence)
        self._last_5xx: float | None = None
        self._eager: tuple[float, float] | None = None  # (eager passes, graph passes) last seen
        self._eager_seen: tuple[float, str] | None = None
        self._over_bucket = 0
        self._down: dict[str, int] = {}
        self._timeouts: dict[str, int] = {}  # of those silent scrapes, in a row, timed out
        self._tput: deque[tuple[float, float, float]] = deque()  # (at, decode tokens, running)
        self._progress_at: float | None = None  # when the decode's counter last moved
        self._progress_value: float | None = None
        self.probes = ProbeTracker(settings)
        self.transfers = TransferWatch(settings)

    def _scaled(self, wall_s: float) -> str:
        """A duration on the one clock watch reports in: model time (the box's), with the wall
        seconds beside it on a scaled twin, so `stuck for 258 s` 26 s after a wedge reads right."""
        scale = self.s.time_scale
        model = f"{wall_s / scale:.0f} s" if wall_s / scale >= 10 else f"{wall_s / scale:.1f} s"
        if scale == 1.0:
            return model
        return f"{model} model time ({wall_s:.1f} s wall at twin time scale {scale:g})"

    def observe(
        self,
        scrape: Scrape,
        probes: Sequence[ProbeOutcome] | None = None,
        silence_s: float | None = None,
        stream_blind: str | None = None,
    ) -> list[Finding]:
        """`silence_s`: seconds since the probe stream's last token (None: no stream under way);
        `stream_blind`: why the probe stream cannot see a wedge, when it cannot."""
        now = scrape.at
        decode = scrape.servers.get("decode")
        tokens = decode.decode_tokens if decode is not None and decode.up else None
        if tokens is not None and self._progress_value != tokens:
            # the first reading is a starting point, not a move
            self._progress_at = now if self._progress_value is not None else self._progress_at
            self._progress_value = tokens
        if probes:
            self.probes.round(now, probes, healthy=_all_healthy(scrape))
        found = [*self._down_and_unhealthy(scrape), *self._failures(scrape)]
        for server in scrape.servers.values():
            found += self._queue_stuck(now, server)
        if decode is not None:
            gauges = self._wedge(now, decode)  # first: it keeps the counter's history
            found += self._stream_wedge(now, decode, silence_s) or gauges
            found += self.transfers.observe(now, decode, self._scaled)
            found += self._eager_fallback(now, decode)
            found += self._throughput(now, decode)
        if stream_blind is not None:
            found.append(
                Finding(
                    "probe_stream_blind",
                    "router",
                    "the probe stream cannot run: a wedge is not seen within 3 s",
                    (stream_blind, "the scrapes and probes still judge the unit"),
                )
            )
        # "the decode makes no progress" needs its counter read in this round
        found += self.probes.findings(now, self._progress_at, decode_read=tokens is not None)
        return found

    # --- components ---------------------------------------------------------------------
    def _down_and_unhealthy(self, scrape: Scrape) -> list[Finding]:
        out = _oversized(scrape)
        # one that answered with too much is there: no streak towards "down"
        errors = {
            n: (None if r.oversized else r.error, r.timed_out) for n, r in scrape.servers.items()
        }
        router = scrape.router
        errors["router"] = (None if router.oversized else router.error, router.timed_out)
        for name, (error, silent) in errors.items():
            self._down[name] = self._down.get(name, 0) + 1 if error else 0
            # down only on a refusal or a broken connection in the streak: a port that accepts
            # and never answers is not evidence that nothing is there (the request's exception
            # type decided it where it was made: HttpReply.timed_out)
            timed_out = bool(error) and silent
            self._timeouts[name] = self._timeouts.get(name, 0) + 1 if timed_out else 0
            if error and self._down[name] >= self.s.down_scrapes:
                if self._timeouts[name] >= self._down[name]:
                    out.append(
                        Finding(
                            "component_unresponsive",
                            name,
                            f"{name} accepts connections but does not answer /metrics",
                            (
                                f"{self._down[name]} scrapes in a row timed out: {error}",
                                "not called down: nothing shows it gone",
                            ),
                            (Basis.METRICS_SCRAPES,),
                        )
                    )
                else:
                    out.append(
                        Finding(
                            "component_down",
                            name,
                            f"{name} does not answer /metrics",
                            (f"{self._down[name]} scrapes in a row: {error}",),
                            (Basis.METRICS_SCRAPES,),
                        )
                    )
        for worker, value in sorted(scrape.router.worker_health.items()):
            if value == 0:
                out.append(
                    Finding(
                        "worker_unhealthy",
                        "router",
                        f"the router marks {worker} unhealthy",
                        (
                            f"smg_worker_health{{worker={worker!r}}} == 0",
                            "the router's own /health checks: not called wedged or down here "
                            "(long chunked prefills fail /health, sglang#22511)",
                        ),
                        (Basis.ROUTER_HEALTH,),
                    )
                )
        return out

    # --- decode wedge -------------------------------------------------------------------
    def _wedge(self, now: float, d: ServerReading) -> list[Finding]:
        if not d.up or not d.running or d.decode_tokens is None:
            self._frozen = None
            return []
        if self._frozen is None or self._frozen.value != d.decode_tokens:
            self._frozen = _Since(now, d.decode_tokens)
            return []
        frozen_for = now - self._frozen.at
        if frozen_for < self.s.wall(self.s.wedge_window_s()):
            return []
        evidence = [
            f"num_running_reqs {d.running:g} (a last-published gauge)",
            f"realtime_tokens_total{{mode=decode}} stuck at {d.decode_tokens:g} for "
            f"{self._scaled(frozen_for)} (window {self.s.wedge_window_s():g} s)",
        ]
        if self.probes.stalled_rounds:
            evidence.append(
                f"{self.probes.stalled_rounds} probe round(s) stalled: " f"{self.probes.last_stall}"
            )
        return [
            Finding(
                "decode_wedged",
                "decode",
                "running requests but no decode progress",
                tuple(evidence),
                (Basis.PROGRESS_COUNTER, Basis.RUNNING_GAUGE)
                + ((Basis.PROBE_ROUNDS,) if self.probes.stalled_rounds else ()),
            )
        ]

    def _stream_wedge(self, now: float, d: ServerReading, silence_s: float | None) -> list[Finding]:
        """The probe stream silent for SILENCE_S decides; the decode's gauges confirm: running > 0
        and the progress counter unmoved since a scrape taken after the stream's last token (so
        over the whole silence the decode produced nothing for anyone)."""
        if silence_s is None or silence_s < SILENCE_S or self._frozen is None:
            return []
        if not d.up or not d.running or d.decode_tokens != self._frozen.value:
            return []
        last_token_at = now - silence_s
        if self._frozen.at < last_token_at or now - self._frozen.at < CONFIRM_GAP_S * 0.9:
            return []  # not yet two scrapes after the last token
        return [
            Finding(
                "decode_wedged",
                "decode",
                "the probe stream went silent and the decode " "makes no progress",
                (
                    f"probe stream: no token for {self._scaled(silence_s)}",
                    f"realtime_tokens_total{{mode=decode}} stuck at {d.decode_tokens:g} "
                    f"for {self._scaled(now - self._frozen.at)} since then",
                    f"num_running_reqs {d.running:g} (a last-published gauge)",
                ),
                (Basis.PROBE_STREAM, Basis.PROGRESS_COUNTER, Basis.RUNNING_GAUGE),
            )
        ]

    # --- PD transfer failures -------------------------------------------------------------
    def _failures(self, scrape: Scrape) -> list[Finding]:
        now = scrape.at
        for name, server in scrape.servers.items():
            if not server.up:
                continue
            before = self._last_failures.get(name)
            self._last_failures[name] = server.failures
            if before is not None and server.failures > before:
                self._fail_seen[name] = (
                    now,
                    (
                        f"transfer+bootstrap failure counters {before:g} -> {server.failures:g} "
                        f"(transfer {server.transfer_failed:g}, bootstrap {server.bootstrap_failed:g})"
                    ),
                )
        r = scrape.router
        if r.up:
            if (
                self._last_5xx is not None
                and r.responses_5xx > self._last_5xx
                and r.worker_health
                and min(r.worker_health.values()) == 1
            ):
                self._fail_seen["router"] = (
                    now,
                    (
                        f"router 5xx responses {self._last_5xx:g} -> {r.responses_5xx:g} while "
                        "every smg_worker_health == 1"
                    ),
                )
            self._last_5xx = r.responses_5xx
        window = self.s.wall(self.s.failure_window_s)
        return [
            Finding(
                "pd_transfer_degraded",
                name,
                "KV transfers or bootstraps failing",
                (ev, f"seen {self._scaled(now - at)} ago"),
            )
            for name, (at, ev) in sorted(self._fail_seen.items())
            if now - at <= window
        ]

    def _queue_stuck(self, now: float, server: ServerReading) -> list[Finding]:
        waiting = server.waiting_in_pd_queues() if server.up else 0.0
        progress = server.progress
        if not waiting or progress is None:
            self._queue.pop(server.name, None)
            return []
        since = self._queue.get(server.name)
        if since is None or since.value != progress:
            self._queue[server.name] = _Since(now, progress)
            return []
        if now - since.at < self.s.wall(self.s.queue_stuck_s):
            return []
        queues = ", ".join(f"{k} {v:g}" for k, v in sorted(server.queues.items()) if v)
        return [
            Finding(
                "queue_stuck",
                server.name,
                "PD queue holds requests and nothing moves",
                (
                    f"queues: {queues}",
                    f"realtime_tokens_total stuck at {progress:g} for "
                    f"{self._scaled(now - since.at)}",
                ),
            )
        ]

    # --- eager fallback and throughput ----------------------------------------------------
    def _eager_fallback(self, now: float, d: ServerReading) -> list[Finding]:
        if not d.up:
            return []
        if d.eager_passes is not None and d.graph_passes is not None:
            before, self._eager = self._eager, (d.eager_passes, d.graph_passes)
            captured = self.s.max_decode_bucket is not None or d.graph_passes > 0
            if before is not None and d.eager_passes > before[0] and captured:
                eager = d.eager_passes - before[0]
                total = eager + max(0.0, d.graph_passes - before[1])
                self._eager_seen = (
                    now,
                    (
                        f"{eager:g} of {total:g} decode passes since the last scrape ran without a "
                        "CUDA graph (cuda_graph_passes_total{mode=decode_none})"
                    ),
                )
        elif self.s.max_decode_bucket is not None:  # no pass counter: the running gauge
            over = (d.running or 0) > self.s.max_decode_bucket
            self._over_bucket = self._over_bucket + 1 if over else 0
            if self._over_bucket >= 2:
                self._eager_seen = (
                    now,
                    f"num_running_reqs {d.running:g} for " f"{self._over_bucket} scrapes",
                )
        if self._eager_seen is None or now - self._eager_seen[0] > self.s.wall(
            self.s.eager_window_s
        ):
            return []
        bucket = self.s.max_decode_bucket
        return [
            Finding(
                "eager_fallback",
                "decode",
                "decode batches above the largest CUDA-graph bucket"
                + (f" ({bucket})" if bucket is not None else "")
                + " run eager",
                (self._eager_seen[1], f"seen {self._scaled(now - self._eager_seen[0])} ago"),
            )
        ]

    def _throughput(self, now: float, d: ServerReading) -> list[Finding]:
        base = self.s.baseline
        if base is None or not d.up or d.decode_tokens is None:
            return []
        self._tput.append((now, d.decode_tokens, d.running or 0.0))
        window = self.s.wall(self.s.throughput_window_s)
        while len(self._tput) > 2 and now - self._tput[1][0] >= window:
            self._tput.popleft()
        t0, tok0, _ = self._tput[0]
        if now - t0 < 0.9 * window or d.decode_tokens < tok0:
            return []
        rate = (d.decode_tokens - tok0) / (now - t0)  # wall tok/s, as the canary measured it
        load = sum(r for _, _, r in self._tput) / len(self._tput)
        same_load = abs(load - base.concurrency) <= self.s.load_tolerance * base.concurrency
        if not same_load or rate >= self.s.throughput_min_ratio * base.tokens_per_s:
            return []
        return [
            Finding(
                "throughput_below_baseline",
                "decode",
                "decode throughput below the last canary's at the same load",
                (
                    f"{rate:.0f} tok/s over {self._scaled(now - t0)} at mean running "
                    f"{load:.1f}",
                    f"canary baseline {base.tokens_per_s:.0f} tok/s at "
                    f"concurrency {base.concurrency} ({base.source})",
                ),
            )
        ]


def _oversized(scrape: Scrape) -> list[Finding]:
    """A /metrics longer than watch reads (METRICS_READ_CAP_BYTES): its server answered, but
    none of its numbers were read, so nothing it shows (a wedge, failures) can be seen."""
    sent = {n: r.oversized for n, r in scrape.servers.items()}
    sent["router"] = scrape.router.oversized
    sent = {n: None if url is None else redact_text(url) for n, url in sent.items()}
    return [
        Finding(
            "metrics_oversized",
            name,
            f"{name}'s /metrics is larger than watch reads: its numbers are unseen",
            (
                f"{url} sent more than {mib(METRICS_READ_CAP_BYTES)} "
                "(METRICS_READ_CAP_BYTES); the read stopped there, nothing of it was parsed",
                f"a real 0.5.23 /metrics is ~0.1-0.5 MB: look for the family that grew "
                f"(curl -s {url} | cut -d'{{' -f1 | sort | uniq -c | sort -rn | head)",
            ),
        )
        for name, url in sorted(sent.items())
        if url is not None
    ]


def _all_healthy(scrape: Scrape) -> bool:
    """Every /health answered 200 and the router calls every worker healthy (when it says)."""
    servers = all(s.health == 200 for s in scrape.servers.values())
    workers = scrape.router.worker_health
    return servers and (not workers or min(workers.values()) == 1)
