"""`dsv4ops buckets plan --metrics-url URL --window S`: the running batch sizes a live decode
reports, sampled over a bounded window (0.5.23 exposes no batch-size histogram), and the memory
its captured decode graphs take (`sglang:graph_memory_usage_gb{phase="decode"}`, when exposed)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv4ops.errors import DsOpsError
from dsv4ops.waits import QUIET, WaitObserver

if TYPE_CHECKING:
    from dsv4ops.canary.loadgen import ChatClient
    from dsv4ops.waits import Wait

MAX_WINDOW_S = 6 * 3600.0
# The first scrapes must hold the gauge: a wrong URL (nothing listening, not a decode's /metrics)
# is said after these few tries, not after the whole window (up to 6 h) of sampling nothing.
FIRST_TRIES = 3


@dataclass(frozen=True)
class LiveSample:
    counts: dict[int, float]  # running batch size -> samples (idle samples dropped)
    graph_memory_gb: float | None  # all captured decode graphs on one GPU, as the decode reports
    captured_graphs: int | None  # len(decode_cuda_graph_bs) from its /server_info, when it says


def sample_decode(
    metrics_url: str, *, window_s: float, interval_s: float = 1.0, waits: WaitObserver = QUIET
) -> LiveSample:
    """{running batch size: samples} from `sglang:num_running_reqs` every `interval_s` for
    `window_s` seconds (idle samples, 0 running, are dropped: they generate no tokens), plus the
    decode's graph memory and captured graph count. DsOpsError when none of the first
    FIRST_TRIES scrapes holds the gauge (said at once) or none of the window's did. `waits`
    shows the sampling while it runs."""
    if not 0 < window_s <= MAX_WINDOW_S or not 0.05 <= interval_s <= window_s:
        raise DsOpsError(
            f"--window {window_s:g}s / interval {interval_s:g}s: expected a window "
            f"up to {MAX_WINDOW_S:g}s and an interval from 0.05s to the window"
        )
    with waits.waiting(f"sampling {metrics_url} every {interval_s:g} s", window_s) as seen:
        return asyncio.run(_sample(metrics_url, window_s, interval_s, seen))


async def _sample(url: str, window_s: float, interval_s: float, seen_by: Wait) -> LiveSample:
    from dsv4ops.canary.loadgen import ChatClient
    from dsv4ops.canary.sampler import scrape_once

    counts: Counter[int] = Counter()
    seen = tries = 0
    graph_gb: float | None = None
    loop = asyncio.get_running_loop()
    end = loop.time() + window_s
    async with ChatClient(url, connections=2, total_timeout_s=10.0, engine="aiohttp") as client:
        while loop.time() < end and (seen or tries < FIRST_TRIES):
            gauges = await scrape_once(client, url)
            tries += 1
            if gauges is not None and gauges.running is not None:
                seen += 1
                if gauges.decode_graph_memory_gb is not None:
                    graph_gb = gauges.decode_graph_memory_gb
                if gauges.running >= 1:
                    counts[round(gauges.running)] += 1
                seen_by.observe(f"{seen} scrapes, {sum(counts.values())} with requests running")
            await asyncio.sleep(interval_s)
        captured = await _captured_graphs(client, url) if graph_gb else None
        if not seen:
            got, hint = await _why_no_gauge(client, url)
            early = loop.time() < end
            raise DsOpsError(
                f"{url}: no scrape held sglang:num_running_reqs ({got}); {tries} tried"
                + (", then sampling stopped before the window's end" if early else ""),
                hint=hint,
            )
    return LiveSample(dict(counts), graph_gb, captured)


async def _why_no_gauge(client: ChatClient, url: str) -> tuple[str, str]:
    """(what one more scrape got, the hint) after none held the decode's running gauge: an
    unreachable URL blamed the decode's --enable-metrics before."""
    from dsv4ops.canary.sampler import metrics_url
    from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES

    status, _, why = await client.get_text_reply(metrics_url(url), max_bytes=METRICS_READ_CAP_BYTES)
    if status == 0:
        return f"the scrape failed: {why}", "check the URL and that this machine reaches the port"
    if why is not None:
        return f"HTTP {status}, a body over {METRICS_READ_CAP_BYTES} bytes, not read", _DECODE
    if status != 200:
        return f"HTTP {status}", _DECODE
    return "the page has no such gauge", "the decode needs --enable-metrics; " + _DECODE


_DECODE = "give the decode's own /metrics URL (e.g. http://box:30001/metrics)"


async def _captured_graphs(client: ChatClient, url: str) -> int | None:
    """How many decode graphs the server captured: /server_info's internal_states[0]
    decode_cuda_graph_bs (0.5.23 sets it in PD mode, internal_state.py L91-105)."""
    base = url.rstrip("/").removesuffix("/metrics")
    status, text = await client.get_text(base + "/server_info")
    if status != 200:
        return None
    try:
        states = json.loads(text).get("internal_states") or [{}]
        bs = states[0].get("decode_cuda_graph_bs")
    except (ValueError, AttributeError, IndexError, TypeError):
        return None
    return len(bs) if isinstance(bs, list) and bs else None
