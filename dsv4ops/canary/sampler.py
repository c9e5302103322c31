"""Live /metrics sampling of the workers during a suite (aiohttp, inside the suite's loop).

Feeds the watchdog (server-wide freeze: work admitted and the decode progress counter standing
still, `progress.py`) and keeps a time series for the sweep (running batch, step time from
`running / gen_throughput`) and the abort cascade (running/queued back to baseline).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from dsv4ops.canary.loadgen import REFUSED, ChatClient
from dsv4ops.canary.watchdog import Watchdog
from dsv4ops.clock import perf_ns
from dsv4ops.errors import DsOpsError
from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES, ServerGauges, parse_text, server_gauges


@dataclass(frozen=True)
class GaugeSample:
    t_ns: int
    url: str
    gauges: ServerGauges


def metrics_url(url: str) -> str:
    base = url.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


# A worker whose port refused this many scrapes in a row, the suite's last, is down (its process
# gone: nothing listens). Three at the 0.5 s interval: a port is never closed for 1 s by a live
# worker, however loaded (a slow one times out instead, which is not counted).
DEAD_AFTER_SCRAPES = 3


@dataclass(frozen=True)
class DeadWorker:
    url: str
    refused: int  # consecutive refused scrapes, the last ones of the suite
    since_ns: int  # the first of them


async def scrape_once(client: ChatClient, url: str) -> ServerGauges | None:
    """One scrape; None when unreachable, not 200, unparsable, or without SGLang load gauges."""
    return (await _scrape(client, url))[0]


async def _scrape(client: ChatClient, url: str) -> tuple[ServerGauges | None, bool]:
    """(gauges as scrape_once, whether the connection was refused)."""
    status, text, why = await client.get_text_reply(
        metrics_url(url), max_bytes=METRICS_READ_CAP_BYTES
    )
    if status != 200 or why is not None:  # why: refused, timed out, or over the cap (unread)
        return None, why == REFUSED
    try:
        gauges = server_gauges(parse_text(text))
    except DsOpsError:
        return None, False
    return (gauges if gauges.has_load_gauges else None), False


class MetricsSampler:
    """`async with MetricsSampler(client, urls, watchdog=wd) as ms:` — samples every interval."""

    def __init__(
        self,
        client: ChatClient,
        urls: Sequence[str],
        *,
        interval_s: float = 0.5,
        watchdog: Watchdog | None = None,
    ) -> None:
        self._client = client
        self.urls = [metrics_url(u) for u in urls]
        self._interval = interval_s
        self._watchdog = watchdog
        self.samples: list[GaugeSample] = []
        self.failures = 0
        self._refused: dict[str, tuple[int, int]] = {}  # url -> (first refused ns, in a row)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> MetricsSampler:
        if self.urls:
            self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            if exc[0] is None:
                await self._settle()

    async def _settle(self) -> None:
        """A suite over before DEAD_AFTER_SCRAPES scrapes (every request refused at once: SMG
        answers 503 without asking a worker once its circuits open on a dead decode) ends with
        a worker's refusals counted but too few to judge: scrape on at the interval until they
        are enough or stop (at most ~1 s more, and only while a worker refuses)."""
        for _ in range(DEAD_AFTER_SCRAPES):
            if not any(0 < n < DEAD_AFTER_SCRAPES for _, n in self._refused.values()):
                return
            await asyncio.sleep(self._interval)
            await self.sample_all()

    async def sample_all(self) -> list[GaugeSample]:
        results = await asyncio.gather(*(_scrape(self._client, u) for u in self.urls))
        now = perf_ns()
        got = []
        for url, (gauges, refused) in zip(self.urls, results, strict=True):
            first, n = self._refused.get(url, (now, 0))
            self._refused[url] = (first, n + 1) if refused else (now, 0)
            if gauges is None:
                self.failures += 1
                continue
            sample = GaugeSample(now, url, gauges)
            self.samples.append(sample)
            got.append(sample)
            if self._watchdog is not None:
                self._watchdog.observe_metrics(url, gauges)
        return got

    async def _run(self) -> None:
        while True:
            await self.sample_all()
            await asyncio.sleep(self._interval)

    def dead_workers(self) -> list[DeadWorker]:
        """The workers whose last DEAD_AFTER_SCRAPES scrapes or more were refused: down now."""
        return [
            DeadWorker(url, n, first)
            for url, (first, n) in self._refused.items()
            if n >= DEAD_AFTER_SCRAPES
        ]

    @property
    def available(self) -> bool:
        return bool(self.samples)

    def decode_url(self) -> str | None:
        """The worker whose metrics say engine_type=decode (else the one generating most)."""
        for s in self.samples:
            if "decode" in s.gauges.engine_types:
                return s.url
        best: dict[str, float] = {}
        for s in self.samples:
            best[s.url] = max(best.get(s.url, 0.0), s.gauges.gen_throughput or 0.0)
        return max(best, key=best.__getitem__) if best else None

    def window(self, url: str, t0_ns: int, t1_ns: int) -> list[ServerGauges]:
        return [s.gauges for s in self.samples if s.url == url and t0_ns <= s.t_ns <= t1_ns]
