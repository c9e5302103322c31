"""Bootstrap degradation: a decode restarted alone against a running prefill loses transfers."""

from __future__ import annotations

import httpx
import pytest

from testing.twin import twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]

# 10 model seconds of waiting/bootstrap timeout at scale 0.05 = 0.5 s wall per lost transfer.
ENV = {"DSV4_TWIN_TIME_SCALE": "0.05", "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "1.0",
       "DSV4_TWIN_WAITING_TIMEOUT_S": "10", "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "10"}


def _chat(client: httpx.Client, url: str) -> httpx.Response:
    return client.post(f"{url}/v1/chat/completions",
                       json={"messages": [{"role": "user", "content": "ping"}], "max_tokens": 3})


def _events(stack, name):
    return [e for e in stack.events() if e["event"] == name]


def test_decode_only_restart_degrades_transfers_and_restarting_both_clears_it():
    with twin_stack(router=True, router_args=["--disable-retries"], env=ENV) as stack, \
            httpx.Client(timeout=30) as client:
        # Fresh pair: the condition is absent, transfers work.
        assert _chat(client, stack.router.url).status_code == 200
        assert not _events(stack, "degraded")

        stack.restart("decode")
        stack.wait_router_ready()
        r = _chat(client, stack.router.url)
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
        assert _chat(client, stack.router.url).status_code == 200
        client.post(f"{stack.prefill.url}/_twin/hazard",
                    json={"hazard": "degrade", "state": "auto"})
        assert _chat(client, stack.router.url).status_code >= 500

        # Restart both, prefill first: clean again.
        n_degraded = len(_events(stack, "degraded"))
        stack.restart("prefill")
        stack.restart("decode")
        stack.wait_router_ready()
        for _ in range(3):
            assert _chat(client, stack.router.url).status_code == 200
        assert len(_events(stack, "degraded")) == n_degraded
        decode_reg = [e for e in _events(stack, "peer_registered") if e["role"] == "decode"][-1]
        prefill_started = [e for e in _events(stack, "started") if e["role"] == "prefill"][-1]
        assert decode_reg["prefill_instance_id"] == prefill_started["instance_id"]


def test_forced_degradation_without_a_restart():
    env = {**ENV, "DSV4_TWIN_FORCE": "degrade"}
    with twin_stack(router=True, router_args=["--disable-retries"], env=env) as stack, \
            httpx.Client(timeout=30) as client:
        assert _chat(client, stack.router.url).status_code >= 500
        assert _events(stack, "transfer_failed")
