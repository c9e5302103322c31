"""Bootstrap degradation: a decode restarted alone against a running prefill loses transfers."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from testing.twin import TwinStack, twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]

# 10 model seconds of waiting/bootstrap timeout at scale 0.05 = 0.5 s wall per lost transfer.
ENV = {
    "DSV4_TWIN_TIME_SCALE": "0.05",
    "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "1.0",
    "DSV4_TWIN_WAITING_TIMEOUT_S": "10",
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "10",
}


def _chat(client: httpx.Client, url: str) -> httpx.Response:
    return client.post(
        f"{url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "ping"}], "max_tokens": 3},
    )


def _events(stack: TwinStack, name: str) -> list[dict[str, Any]]:
    return [e for e in stack.events() if e["event"] == name]


def test_decode_only_restart_degrades_transfers_and_restarting_both_clears_it() -> None:
    with (
        twin_stack(router=True, router_args=["--disable-retries"], env=ENV) as stack,
        httpx.Client(timeout=30) as client,
    ):
        # Fresh pair: the condition is absent, transfers work.
        assert _chat(client, stack.router_url).status_code == 200
        assert not _events(stack, "degraded")

        stack.restart("decode")
        stack.wait_router_ready()
        r = _chat(client, stack.router_url)
        assert r.status_code >= 500  # hung until the waiting timeout, then failed
        assert _events(stack, "degraded")
        failed = _events(stack, "transfer_failed")
        assert {e["side"] for e in failed} >= {"decode", "prefill"}
        # SGLang's PD health check uses a fake bootstrap: both still look healthy.
        assert client.get(f"{stack.prefill.url}/health").status_code == 200
        assert client.get(f"{stack.decode.url}/health").status_code == 200
        state = client.get(f"{stack.prefill.url}/_twin/state").json()
        assert state["degraded_peers"]

        # Runtime switch: the operator turns the hazard off on the prefill.
        client.post(f"{stack.prefill.url}/_twin/hazard", json={"hazard": "degrade", "state": "off"})
        assert _chat(client, stack.router_url).status_code == 200
        client.post(
            f"{stack.prefill.url}/_twin/hazard", json={"hazard": "degrade", "state": "auto"}
        )
        assert _chat(client, stack.router_url).status_code >= 500

        # Restart both, prefill first: clean again.
        n_degraded = len(_events(stack, "degraded"))
        stack.restart("prefill")
        stack.restart("decode")
        stack.wait_router_ready()
        for _ in range(3):
            assert _chat(client, stack.router_url).status_code == 200
        assert len(_events(stack, "degraded")) == n_degraded
        decode_reg = [e for e in _events(stack, "peer_registered") if e["role"] == "decode"][-1]
        prefill_started = [e for e in _events(stack, "started") if e["role"] == "prefill"][-1]
        assert decode_reg["prefill_instance_id"] == prefill_started["instance_id"]


def test_forced_degradation_without_a_restart() -> None:
    env = {**ENV, "DSV4_TWIN_FORCE": "degrade"}
    with (
        twin_stack(router=True, router_args=["--disable-retries"], env=env) as stack,
        httpx.Client(timeout=30) as client,
    ):
        assert _chat(client, stack.router_url).status_code >= 500
        assert _events(stack, "transfer_failed")


def _failures(client: httpx.Client, url: str) -> float:
    total = 0.0
    for line in client.get(f"{url}/metrics").text.splitlines():
        if line.startswith(
            ("sglang:num_transfer_failed_reqs_total", "sglang:num_bootstrap_failed_reqs_total")
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _counted_on_both_sides(client: httpx.Client, stack: TwinStack) -> tuple[float, float]:
    """Waits (bounded) until the lost transfer's own timeouts counted it on both sides."""
    deadline = time.monotonic() + 20
    while True:
        counts = (_failures(client, stack.prefill.url), _failures(client, stack.decode.url))
        if all(counts):
            return counts
        assert time.monotonic() < deadline, counts
        time.sleep(0.05)


def test_failure_counters_stop_rising_once_the_hazard_is_off_and_lost_transfers_timed_out() -> None:
    """Turning the hazard off ends new losses; transfers already lost still count when their
    own timeouts expire (as on the box), then the counters stand still under new traffic."""
    env = {**ENV, "DSV4_TWIN_FORCE": "degrade"}
    metrics = ["--enable-metrics"]
    with (
        twin_stack(
            router=True,
            router_args=["--disable-retries"],
            env=env,
            prefill_args=metrics,
            decode_args=metrics,
        ) as stack,
        httpx.Client(timeout=30) as client,
    ):
        assert _chat(client, stack.router_url).status_code >= 500
        for url in (stack.prefill.url, stack.decode.url):
            client.post(f"{url}/_twin/hazard", json={"hazard": "degrade", "state": "off"})
        settled = _counted_on_both_sides(client, stack)
        lost = len(_events(stack, "transfer_failed"))
        for _ in range(4):
            assert _chat(client, stack.router_url).status_code == 200
        time.sleep(1.0)  # two of the 0.5 s wall timeouts: a new loss would have counted
        assert (
            _failures(client, stack.prefill.url),
            _failures(client, stack.decode.url),
        ) == settled
        assert len(_events(stack, "transfer_failed")) == lost
