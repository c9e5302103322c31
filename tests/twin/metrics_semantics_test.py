"""The twin's /metrics with SGLang 0.5.23's semantics, through real twin processes and
prometheus_client's parser: published (not live) gauges, frozen while the loop is blocked,
idle republish, realtime_tokens_total, prefill queue gauges, PD failure counters on both sides."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.twin import fake_bootstrap, twin_server, twin_stack

pytestmark = pytest.mark.slow

# Scale 0.2: a step at batch 4 is ~4.4 ms of wall; 5 iterations per log ≈ 22 ms.
ENV = {"DSV4_TWIN_TIME_SCALE": "0.2"}
DECODE = ["--disaggregation-mode", "decode", "--enable-metrics"]


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample as {(name, sorted labels minus the base labels): value}."""
    out: Samples = {}
    for fam in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for s in fam.samples:
            extra = tuple(
                sorted(
                    (k, v)
                    for k, v in s.labels.items()
                    if k not in ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
                )
            )
            out[(s.name, extra)] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def decode_tokens(samples: Samples) -> float:
    return value(samples, "sglang:realtime_tokens_total", mode="decode")


def wait_for(what: str, fn: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not fn():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        time.sleep(0.02)


async def _streams(url: str, n: int, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> None:
            body = {
                "text": f"long {i}",
                "stream": True,
                "sampling_params": {"max_new_tokens": 100000},
                **fake_bootstrap(),
            }
            async with session.post(f"{url}/generate", json=body) as resp:
                async for _ in resp.content:
                    if stop.is_set():
                        return

        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Streams:
    """n long streams in a background thread's loop, for as long as the `with` lasts."""

    def __init__(self, url: str, n: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(_streams(url, n, self._stop),), daemon=True
        )

    def __enter__(self) -> Streams:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _wedged_with_frozen_gauges(env: dict[str, str]) -> tuple[Samples, Samples, Samples]:
    """4 decoding streams, gauges published with them, then a forced wedge: (before, a, b)."""
    with (
        twin_server([*DECODE, "--decode-log-interval", "5"], env={**ENV, **env}) as proc,
        Streams(proc.url, 4),
    ):
        wait_for(
            "4 running published", lambda: value(scrape(proc.url), "sglang:num_running_reqs") == 4
        )
        before = scrape(proc.url)
        httpx.post(f"{proc.url}/_twin/hazard", json={"hazard": "wedge", "state": "force"})
        assert httpx.get(f"{proc.url}/_twin/state").json()["wedged"]
        time.sleep(0.5)  # the idle path, if any, runs every 0.25 s
        a = scrape(proc.url)
        time.sleep(1.0)  # ~45 log intervals of a healthy loop
        b = scrape(proc.url)
        assert httpx.get(f"{proc.url}/_twin/state").json()["running"] == 4  # the ranks hold it
    return before, a, b


def test_a_blocked_rank_0_freezes_its_gauges_at_the_last_values() -> None:
    before, a, b = _wedged_with_frozen_gauges({})
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:token_usage",
    ):
        assert value(a, name) == value(b, name), name
    assert value(b, "sglang:num_running_reqs") == 4
    assert value(b, "sglang:gen_throughput") > 0  # not 0: nothing republishes it
    assert decode_tokens(a) == decode_tokens(b)  # the progress counter stopped
    assert decode_tokens(b) >= decode_tokens(before) > 0


def test_rank_0_idle_variant_republishes_idle_values_but_its_counters_stop() -> None:
    _, a, b = _wedged_with_frozen_gauges({"DSV4_TWIN_WEDGE_RANK0": "idle"})
    assert value(b, "sglang:num_running_reqs") == 0  # rank 0's own (empty) batch
    assert value(b, "sglang:gen_throughput") == 0.0
    assert decode_tokens(a) == decode_tokens(b) > 0


def test_a_healthy_decode_republishes_idle_values_once_the_batch_drains() -> None:
    with twin_server([*DECODE, "--decode-log-interval", "5"], env=ENV) as proc:
        with Streams(proc.url, 3):
            wait_for(
                "3 running published",
                lambda: value(scrape(proc.url), "sglang:num_running_reqs") == 3,
            )
            assert value(scrape(proc.url), "sglang:gen_throughput") > 0
        wait_for(
            "idle republish",
            lambda: value(scrape(proc.url), "sglang:num_running_reqs") == 0,
            timeout_s=5,
        )
        assert value(scrape(proc.url), "sglang:gen_throughput") == 0.0


def _generate(url: str, tokens: int) -> None:
    body = {"text": "count", "sampling_params": {"max_new_tokens": tokens}, **fake_bootstrap()}
    assert httpx.post(f"{url}/generate", json=body, timeout=30).status_code == 200


def test_realtime_tokens_every_iteration_with_a_non_default_decode_log_interval() -> None:
    with twin_server([*DECODE, "--decode-log-interval", "7"], env=ENV) as proc:
        before = decode_tokens(scrape(proc.url))  # the readiness probes' tokens
        _generate(proc.url, 23)
        assert decode_tokens(scrape(proc.url)) - before == 23


def test_realtime_tokens_only_at_the_log_interval_in_the_worst_case_variant() -> None:
    env = {**ENV, "DSV4_TWIN_REALTIME_TOKENS": "per_log_interval"}
    with twin_server([*DECODE, "--decode-log-interval", "7"], env=env) as proc:
        _generate(proc.url, 23)
        # 23 iterations (+ up to 4 one-token readiness probes) → logs at 7, 14 and 21 only
        assert decode_tokens(scrape(proc.url)) == 21


def test_gauges_wait_for_the_log_interval_while_decoding() -> None:
    with (
        twin_server([*DECODE, "--decode-log-interval", "100000"], env=ENV) as proc,
        Streams(proc.url, 2),
    ):
        wait_for("2 running", lambda: httpx.get(f"{proc.url}/_twin/state").json()["running"] == 2)
        time.sleep(0.3)
        got = scrape(proc.url)
        assert decode_tokens(got) > 0  # the counter moves every iteration...
        assert value(got, "sglang:num_running_reqs") == 0  # ...the gauges only at a log


def _prefill_post(url: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{url}/generate", json=body, timeout=30)


STUCK = {
    "text": "never pulled",
    "sampling_params": {"max_new_tokens": 4},
    "bootstrap_host": "127.0.0.1",
    "bootstrap_port": 1,  # no decode will ever ask for this room
    "bootstrap_room": 4242,
}
PREFILL = ["--disaggregation-mode", "prefill", "--enable-metrics"]


def _prefill_computed(url: str) -> float:
    return value(scrape(url), "sglang:realtime_tokens_total", mode="prefill_compute")


def test_prefill_reports_its_batches_and_a_room_waiting_for_bootstrap() -> None:
    # The room must still be queued when the next batch publishes the gauge: its bootstrap
    # timeout (3600 model s, 12 min of wall) cannot run out first however slow the machine is
    # (10 s of wall once did on a loaded run); the test ends without waiting for it.
    env = {**ENV, "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "3600"}
    with twin_server(PREFILL, env=env) as proc:
        # Counted from here: the readiness probe's /health already ran a one-token prefill.
        before = _prefill_computed(proc.url)
        threading.Thread(target=_prefill_post, args=(proc.url, STUCK), daemon=True).start()
        wait_for("the stuck room", lambda: _prefill_computed(proc.url) > before)
        _generate(proc.url, 1)  # a fake-bootstrap request: one more prefill batch
        got = scrape(proc.url)
        assert value(got, "sglang:num_prefill_bootstrap_queue_reqs") == 1
        assert value(got, "sglang:num_running_reqs") == 1  # the last batch: nothing zeroes it
        assert value(got, "sglang:num_bootstrap_failed_reqs_total") == 0


def test_a_room_never_bootstrapped_fails_as_a_bootstrap_failure_and_idle_zeroes_the_gauges() -> (
    None
):
    env = {**ENV, "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "5"}  # 1 s of wall after its compute
    with twin_server(PREFILL, env=env) as proc:
        before = _prefill_computed(proc.url)
        t = threading.Thread(target=_prefill_post, args=(proc.url, STUCK))
        t.start()
        wait_for("the stuck room", lambda: _prefill_computed(proc.url) > before)
        t.join(40)
        assert not t.is_alive()
        got = scrape(proc.url)
        assert value(got, "sglang:num_bootstrap_failed_reqs_total") == 1
        assert value(got, "sglang:num_transfer_failed_reqs_total") == 0
        # now fully idle: the idle path republishes the true values
        assert value(got, "sglang:num_running_reqs") == 0
        assert value(got, "sglang:num_prefill_bootstrap_queue_reqs") == 0


async def _pd_request(prefill: str, decode: str, boot_port: int, room: int) -> None:
    body = {
        "text": "lost",
        "sampling_params": {"max_new_tokens": 3},
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": boot_port,
        "bootstrap_room": room,
    }
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:

        async def post(url: str) -> int:
            async with s.post(f"{url}/generate", json=body) as r:
                await r.read()
                return r.status

        statuses = await asyncio.gather(post(prefill), post(decode))
    assert list(statuses) == [500, 500], statuses  # gather returns a list (typeshed says tuple)


def test_a_lost_transfer_is_counted_on_both_sides_and_a_dead_bootstrap_on_the_decode() -> None:
    env = {
        "DSV4_TWIN_TIME_SCALE": "0.05",
        "DSV4_TWIN_FORCE": "degrade",
        "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "1.0",
        "DSV4_TWIN_WAITING_TIMEOUT_S": "10",
        "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "10",
    }
    with twin_stack(
        prefill_args=["--enable-metrics"], decode_args=["--enable-metrics"], env=env
    ) as stack:
        # 0.5.23 creates a failure counter's labelled series on its first increment: before any
        # failure there is no sample at all (an alert on `increase()` alone misses the first one)
        for url in (stack.prefill.url, stack.decode.url):
            fresh = scrape(url)
            assert not any(k[0].endswith("_failed_reqs_total") for k in fresh), sorted(fresh)
        assert stack.prefill.bootstrap_port is not None
        asyncio.run(
            _pd_request(stack.prefill.url, stack.decode.url, stack.prefill.bootstrap_port, 7)
        )
        p, d = scrape(stack.prefill.url), scrape(stack.decode.url)
        assert value(p, "sglang:num_transfer_failed_reqs_total") == 1
        assert value(d, "sglang:num_transfer_failed_reqs_total") == 1
        assert value(p, "sglang:num_bootstrap_failed_reqs_total") == 0
        # a bootstrap server nobody listens on: the decode's handshake fails
        body = {
            "text": "x",
            "sampling_params": {"max_new_tokens": 2},
            "bootstrap_host": "127.0.0.1",
            "bootstrap_port": 1,
            "bootstrap_room": 8,
        }
        assert httpx.post(f"{stack.decode.url}/generate", json=body, timeout=30).status_code == 500
        d = scrape(stack.decode.url)
        assert value(d, "sglang:num_bootstrap_failed_reqs_total") == 1
        assert value(d, "sglang:num_transfer_failed_reqs_total") == 1
