"""PD liveness as in SGLang 0.5.23: the decode's heartbeat, and no instance check (stale metadata)."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import httpx
import pytest

from testing.twin import TwinStack, twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]
SCALE = 0.05


def _chat(client: httpx.Client, url: str) -> httpx.Response:
    return client.post(
        f"{url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "SAY ok"}], "max_tokens": 3},
    )


def _events(stack: TwinStack, name: str) -> list[dict[str, Any]]:
    return [e for e in stack.events() if e["event"] == name]


def test_heartbeat_misses_drop_the_prefill_and_fail_the_transfers_in_flight() -> None:
    # heartbeat every 2 model s (SGLang's floor) = 0.1 s wall; waiting timeout 300 model s = 15 s
    env = {"DSV4_TWIN_TIME_SCALE": str(SCALE)}
    decode_env = {"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "2"}
    with twin_stack(env=env, decode_env=decode_env) as stack, httpx.Client(timeout=30) as c:
        boot = {"bootstrap_host": "127.0.0.1", "bootstrap_port": stack.prefill.bootstrap_port}
        # a room the prefill never opens: the decode's pull waits on the prefill
        out: dict[str, Any] = {}

        def pending() -> None:
            t0 = time.monotonic()
            out["r"] = c.post(
                f"{stack.decode.url}/generate", json={"text": "hi", "bootstrap_room": 4242, **boot}
            )
            out["took"] = time.monotonic() - t0

        t = threading.Thread(target=pending)
        t.start()
        deadline = time.monotonic() + 10
        while not c.get(f"{stack.decode.url}/_twin/state").json()["peers"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        stack.kill("prefill", signal.SIGKILL)
        t.join(20)
        assert out["r"].status_code == 500
        assert "Lost connection with prefill instance" in out["r"].text
        assert out["took"] < 300 * SCALE * 0.5  # the heartbeat, not the waiting timeout
        lost = _events(stack, "prefill_lost")
        assert lost and lost[0]["affected"] == 1
        # the cached prefill info is gone
        assert c.get(f"{stack.decode.url}/_twin/state").json()["peers"] == []
        # SGLang's /health never touches KV transfer: the decode stays green
        assert c.get(f"{stack.decode.url}/health").status_code == 200


def test_a_prefill_replaced_behind_the_same_address_leaves_stale_metadata_on_the_decode() -> None:
    # No heartbeat miss: the new prefill's bootstrap server answers /health from its first
    # second, so a quick replacement is never noticed (interval raised so test load cannot
    # make it miss twice). Waiting timeout 20 model s = 1 s wall.
    env = {
        "DSV4_TWIN_TIME_SCALE": str(SCALE),
        "DSV4_TWIN_WAITING_TIMEOUT_S": "20",
        "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "20",
    }
    decode_env = {"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "2000"}
    with (
        twin_stack(
            router=True, router_args=["--disable-retries"], env=env, decode_env=decode_env
        ) as stack,
        httpx.Client(timeout=30) as c,
    ):
        assert _chat(c, stack.router_url).status_code == 200
        old = c.get(f"{stack.prefill.url}/_twin/state").json()["instance_id"]
        stack.kill("prefill", signal.SIGKILL)
        stack.start("prefill")
        stack.wait_router_ready()
        new = c.get(f"{stack.prefill.url}/_twin/state").json()["instance_id"]
        assert new != old
        peers = c.get(f"{stack.decode.url}/_twin/state").json()["peers"]
        assert [p["prefill_instance_id"] for p in peers] == [old]  # stale, and not re-checked
        t0 = time.monotonic()
        r = _chat(c, stack.router_url)
        # no "unknown peer, register again" answer: the transfer goes unanswered until the
        # decode's waiting timeout, which invalidates the cached connection
        assert r.status_code >= 500
        assert time.monotonic() - t0 >= 20 * SCALE * 0.9
        assert _events(stack, "transfer_unanswered")
        # the next request registers with the new prefill and works
        assert _chat(c, stack.router_url).status_code == 200
        regs = [e for e in _events(stack, "peer_registered") if e["role"] == "decode"]
        assert [e["prefill_instance_id"] for e in regs] == [old, new]
        assert c.get(f"{stack.decode.url}/health").status_code == 200
