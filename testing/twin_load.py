"""Measure a twin decode's step time from the outside (for the fidelity test and the benchmark).

`measure_step_ms` keeps `concurrency - 1` background requests running on a decode, adds one
streaming probe and times its tokens on the client; the step is the least-squares slope of
arrival time over token index, converted to model milliseconds with the twin's time scale. Requests use SGLang's fake bootstrap host, so a
lone decode needs no prefill.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

FAKE_BOOTSTRAP = {"bootstrap_host": "2.2.2.2", "bootstrap_port": 0, "bootstrap_room": 0}


async def _state(session: aiohttp.ClientSession, url: str) -> dict:
    async with session.get(f"{url}/_twin/state") as resp:
        return await resp.json()


async def wait_running(session: aiohttp.ClientSession, url: str, n: int,
                       timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await _state(session, url))["running"] == n:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"decode at {url} never reached {n} running requests")


async def _background(session: aiohttp.ClientSession, url: str, i: int, stream: bool) -> int:
    body = {"text": f"background request {i}", "stream": stream,
            "sampling_params": {"max_new_tokens": 1_000_000}, **FAKE_BOOTSTRAP}
    chunks = 0
    async with session.post(f"{url}/generate", json=body) as resp:
        if stream:
            async for line in resp.content:
                chunks += line.startswith(b"data:")
        else:
            await resp.read()
    return chunks


async def _probe(session: aiohttp.ClientSession, url: str, tokens: int) -> list[float]:
    body = {"text": "probe request", "stream": True,
            "sampling_params": {"max_new_tokens": tokens}, **FAKE_BOOTSTRAP}
    arrivals: list[float] = []
    async with session.post(f"{url}/generate", json=body) as resp:
        async for line in resp.content:
            if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
                arrivals.append(time.perf_counter())
    return arrivals


async def measure_step_ms(url: str, concurrency: int, *, probe_tokens: int, time_scale: float,
                          stream_background: bool = False) -> float:
    """Mean modelled step (ms) at `concurrency` running requests; aborts the load afterwards."""
    timeout = aiohttp.ClientTimeout(total=300)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        tasks = [asyncio.create_task(_background(session, url, i, stream_background))
                 for i in range(concurrency - 1)]
        try:
            await wait_running(session, url, concurrency - 1)
            arrivals = await _probe(session, url, probe_tokens)
        finally:
            async with session.post(f"{url}/abort_request", json={"abort_all": True}):
                pass
            await asyncio.gather(*tasks, return_exceptions=True)
            await wait_running(session, url, 0)
    if len(arrivals) < probe_tokens:
        raise RuntimeError(f"probe got {len(arrivals)} of {probe_tokens} tokens")
    return step_from_arrivals(arrivals[:probe_tokens]) / time_scale * 1000.0


def step_from_arrivals(arrivals: list[float]) -> float:
    """Least-squares slope of arrival time over token index: every arrival contributes, so a
    late first or last token (client jitter) barely moves it."""
    n = len(arrivals)
    mean_i = (n - 1) / 2
    mean_t = sum(arrivals) / n
    num = sum((i - mean_i) * (t - mean_t) for i, t in enumerate(arrivals))
    den = sum((i - mean_i) ** 2 for i in range(n))
    return num / den
