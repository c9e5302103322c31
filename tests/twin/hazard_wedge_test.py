"""Overlap-scheduler wedge: an abort cascade with the overlap scheduler on freezes the decode."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.twin import TwinStack, fake_bootstrap, twin_server, twin_stack

pytestmark = pytest.mark.slow

# Scale 0.2 keeps streamed steps >= 4 ms of wall time; a 5 s health timeout is 1 s of wall.
ENV = {"DSV4_TWIN_TIME_SCALE": "0.2", "DSV4_TWIN_HEALTH_TIMEOUT_S": "5"}
N = 10


def _gauge(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for fam in text_string_to_metric_families(text):
        if fam.name == name:
            return fam.samples[0].value
    raise AssertionError(f"{name} missing")


def _scheduler_metrics(url: str) -> dict[str, float]:
    """Rank 0's load gauges and its decode progress counter."""
    got = {
        name: _gauge(url, name)
        for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput")
    }
    text = httpx.get(f"{url}/metrics", timeout=10).text
    got["decode_tokens"] = sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "sglang:realtime_tokens_total" and s.labels.get("mode") == "decode"
    )
    return got


async def _wait_state(
    session: aiohttp.ClientSession,
    url: str,
    done: Callable[[dict[str, Any]], object],
    what: str,
    timeout_s: float = 15.0,
) -> dict[str, Any]:
    """Poll /_twin/state until done(state); fail the test (not hang) past the bounded deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        async with session.get(f"{url}/_twin/state") as r:
            state: dict[str, Any] = await r.json()
        if done(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s: {state}")
        await asyncio.sleep(0.05)


async def _streams_then_abort_each(router_url: str, decode_url: str, n: int) -> None:
    """n streaming chats through the router; once all run on the decode, abort each by its rid.

    Per-rid aborts (never abort_all), with the id the decode reports as the chunk `id`: the
    router drops a client `rid` from chat bodies, so that is the id the decode serves it under.
    """
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
        ids: list[str] = []

        async def one(i: int) -> list[bytes]:
            body = {
                "messages": [{"role": "user", "content": f"long story {i}"}],
                "max_tokens": 100000,
                "stream": True,
            }
            lines = []
            async with session.post(f"{router_url}/v1/chat/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        lines.append(line)
                        if len(lines) == 1:
                            ids.append(json.loads(line[6:])["id"])
            return lines

        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        state = await _wait_state(
            session,
            decode_url,
            lambda s: s["running"] >= n and len(ids) >= n,
            f"{n} running streams with ids",
        )
        # ...and rank 0 reported them (at its next --decode-log-interval), as on a box that
        # has been decoding for a while
        deadline = time.monotonic() + 15
        while await asyncio.to_thread(_gauge, decode_url, "sglang:num_running_reqs") < n:
            assert time.monotonic() < deadline, "the running gauge never reached the batch"
            await asyncio.sleep(0.05)
        assert sorted(ids) == sorted(state["inflight_rids"])  # the chunk id is the decode's rid
        for rid in ids:
            async with session.post(
                f"{decode_url}/abort_request", json={"rid": rid, "abort_all": False}
            ) as r:
                assert r.status == 200
        outs = await asyncio.wait_for(asyncio.gather(*tasks), 10)
        # every stream was ended by the server with finish_reason "abort", not cut by us
        assert all(
            b'"finish_reason": "abort"' in b"".join(o) or b'"finish_reason":"abort"' in b"".join(o)
            for o in outs
        ), [o[-2:] for o in outs]


def _probe_completes(decode_url: str, timeout: float) -> bool:
    body = {"text": "are you there", "sampling_params": {"max_new_tokens": 2}, **fake_bootstrap()}
    try:
        return httpx.post(f"{decode_url}/generate", json=body, timeout=timeout).status_code == 200
    except httpx.TimeoutException:
        return False


def _cascade(decode_args: list[str], env: dict[str, str] | None = None) -> Iterator[TwinStack]:
    with twin_stack(
        router=True, decode_args=["--enable-metrics", *decode_args], env={**ENV, **(env or {})}
    ) as stack:
        asyncio.run(_streams_then_abort_each(stack.router_url, stack.decode.url, N))
        yield stack


@pytest.mark.router
def test_abort_cascade_with_overlap_on_wedges_the_decode() -> None:
    for stack in _cascade([]):
        events = [e["event"] for e in stack.events()]
        assert "abort_cascade" in events and "wedged" in events
        state = httpx.get(f"{stack.decode.url}/_twin/state").json()
        assert state["wedged"] and state["running"] > 0
        assert not _probe_completes(stack.decode.url, timeout=1.5)  # new requests queue forever
        assert httpx.get(f"{stack.decode.url}/health", timeout=10).status_code == 503
        assert httpx.get(f"{stack.decode.url}/_twin/state").json()["queued"] >= 1
        # rank 0's loop is blocked: its gauges keep the values of its last report (0.5.23's
        # mostrecent gauges), so running > 0 AND gen_throughput > 0, and nothing moves
        frozen = _scheduler_metrics(stack.decode.url)
        assert frozen["sglang:num_running_reqs"] > 0
        assert frozen["sglang:gen_throughput"] > 0
        time.sleep(1.0)  # dozens of log intervals of a healthy loop at this scale
        assert _scheduler_metrics(stack.decode.url) == frozen
        # Only a restart clears it.
        stack.restart("decode")
        assert _probe_completes(stack.decode.url, timeout=10)


@pytest.mark.router
def test_same_cascade_with_overlap_off_does_not_wedge() -> None:
    for stack in _cascade(["--disable-overlap-schedule"]):
        cascades = [e for e in stack.events() if e["event"] == "abort_cascade"]
        assert cascades and cascades[0]["wedges"] is False
        assert not [e for e in stack.events() if e["event"] == "wedged"]
        assert _probe_completes(stack.decode.url, timeout=10)
        assert httpx.get(f"{stack.decode.url}/health", timeout=10).status_code == 200


def test_client_disconnect_cascade_wedges_and_hazards_off_prevents_it() -> None:
    async def disconnect_many(url: str) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            responses = []
            for i in range(N):
                body = {
                    "text": f"s{i}",
                    "stream": True,
                    "sampling_params": {"max_new_tokens": 100000},
                    **fake_bootstrap(),
                }
                resp = await session.post(f"{url}/generate", json=body)
                await resp.content.readline()
                responses.append(resp)
            for resp in responses:
                resp.close()  # drop the connection mid-stream
            # wedged, or every disconnect processed (nothing running) without a wedge
            return await _wait_state(
                session,
                url,
                lambda s: s["wedged"] or s["running"] == 0,
                "wedge or drained decode",
                timeout_s=10,
            )

    for env, wedges in (({}, True), ({"DSV4_TWIN_HAZARDS": "off"}, False)):
        with twin_server(["--disaggregation-mode", "decode"], env={**ENV, **env}) as proc:
            state = asyncio.run(disconnect_many(proc.url))
            assert state["wedged"] is wedges
            assert _probe_completes(proc.url, timeout=1.5) is not wedges


def test_forced_wedge_at_run_time() -> None:
    with twin_server(["--disaggregation-mode", "decode"], env=ENV) as proc:
        assert _probe_completes(proc.url, timeout=5)
        httpx.post(f"{proc.url}/_twin/hazard", json={"hazard": "wedge", "state": "force"})
        assert httpx.get(f"{proc.url}/_twin/state").json()["wedged"]
        assert not _probe_completes(proc.url, timeout=1.0)


@pytest.mark.router
def test_a_wedged_decode_never_asks_for_a_new_rooms_kv_so_the_prefill_times_it_out() -> None:
    """0.5.23's decode handshakes and pulls KV from its scheduler loop: a wedged one never asks
    for a new request's room, so the prefill counts a bootstrap failure after its bootstrap
    timeout while the decode's gauges and counters show nothing. The rank-0-idle variant (whose
    gauges read as an idle server's) is where this is the decode's only trace in the metrics;
    both variants take the same path."""
    env = {**ENV, "DSV4_TWIN_WEDGE_RANK0": "idle", "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "5"}
    with twin_stack(
        router=True, env=env, prefill_args=["--enable-metrics"], decode_args=["--enable-metrics"]
    ) as stack:
        httpx.post(f"{stack.decode.url}/_twin/hazard", json={"hazard": "wedge", "state": "force"})
        body = {
            "model": "default",
            "messages": [{"role": "user", "content": "SAY hi"}],
            "max_tokens": 4,
        }
        with pytest.raises(httpx.TimeoutException):  # the decode keeps it, with no timeout
            httpx.post(f"{stack.router_url}/v1/chat/completions", json=body, timeout=2.5)
        deadline = time.monotonic() + 10
        while _counter(stack.prefill.url, "sglang:num_bootstrap_failed_reqs_total") < 1:
            assert time.monotonic() < deadline, "the prefill never timed the room out"
            time.sleep(0.1)
        assert _counter(stack.decode.url, "sglang:num_transfer_failed_reqs_total") == 0
        assert _counter(stack.decode.url, "sglang:num_bootstrap_failed_reqs_total") == 0
        # the decode never even handshook with the prefill (it registers on its first request)
        assert "peer_registered" not in {e["event"] for e in stack.events()}


def _counter(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name
    )
