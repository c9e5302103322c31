"""`dsv4ops buckets plan --metrics-url URL --window S`: the running batch sizes a live decode
reports, sampled over a bounded window (0.5.23 exposes no batch-size histogram)."""

from __future__ import annotations

import asyncio
from collections import Counter

from dsv4ops.errors import DsOpsError

MAX_WINDOW_S = 6 * 3600.0


def sample_running(metrics_url: str, *, window_s: float, interval_s: float = 1.0) -> dict[int, float]:
    """{running batch size: samples} from `sglang:num_running_reqs` every `interval_s` for
    `window_s` seconds. Idle samples (0 running) are dropped: they generate no tokens."""
    if not 0 < window_s <= MAX_WINDOW_S or not 0.05 <= interval_s <= window_s:
        raise DsOpsError(f"--window {window_s:g}s / interval {interval_s:g}s: expected a window "
                         f"up to {MAX_WINDOW_S:g}s and an interval from 0.05s to the window")
    return asyncio.run(_sample(metrics_url, window_s, interval_s))


async def _sample(url: str, window_s: float, interval_s: float) -> dict[int, float]:
    from dsv4ops.canary.loadgen import ChatClient
    from dsv4ops.canary.sampler import scrape_once

    counts: Counter[int] = Counter()
    seen = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + window_s
    async with ChatClient(url, connections=2, total_timeout_s=10.0, engine="aiohttp") as client:
        while loop.time() < end:
            gauges = await scrape_once(client, url)
            if gauges is not None and gauges.running is not None:
                seen += 1
                if gauges.running >= 1:
                    counts[round(gauges.running)] += 1
            await asyncio.sleep(interval_s)
    if not seen:
        raise DsOpsError(f"{url}: no sglang:num_running_reqs in any scrape",
                         hint="the decode needs --enable-metrics; give its /metrics URL")
    return dict(counts)
