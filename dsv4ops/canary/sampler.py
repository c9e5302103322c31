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

from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.watchdog import Watchdog
from dsv4ops.clock import perf_ns
from dsv4ops.errors import DsOpsError
from dsv4ops.metrics.prom import ServerGauges, parse_text, server_gauges


@dataclass(frozen=True)
class GaugeSample:
    t_ns: int
    url: str
    gauges: ServerGauges


def metrics_url(url: str) -> str:
    base = url.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


async def scrape_once(client: ChatClient, url: str) -> ServerGauges | None:
    """One scrape; None when unreachable, not 200, unparsable, or without SGLang load gauges."""
    status, text = await client.get_text(metrics_url(url))
    if status != 200:
        return None
    try:
        gauges = server_gauges(parse_text(text))
    except DsOpsError:
        return None
    return gauges if gauges.has_load_gauges else None


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

    async def sample_all(self) -> list[GaugeSample]:
        results = await asyncio.gather(*(scrape_once(self._client, u) for u in self.urls))
        now = perf_ns()
        got = []
        for url, gauges in zip(self.urls, results, strict=True):
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
