"""sgl-project/sglang#31206 ("open circuit breaker still dispatches to decode") behind the real
SMG 1.13.0 on the twin: with the prefill gone, SMG fails the first requests with 502 (each sent
to the decode too: PD dispatches both at once, and it retries), then its prefill circuit opens
and every request is refused 503 `no_available_workers` before any dispatch: nothing more reaches
the decode. The bug does not reproduce here; /workers meanwhile still lists both workers (it
shows the health checks, not the circuits: on an idle machine both read healthy). docs/deploy.md "Which router"."""

from __future__ import annotations

import os
import signal
import socket
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dsv4ops.routerkind import RouterKind
from testing.twin import TwinStack, twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]


def _chats_at_decode(stack: TwinStack) -> float:
    """The chat completions the decode has been sent (its HTTP counter)."""
    text = httpx.get(stack.decode.url + "/metrics", timeout=5).text
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "sglang:http_requests_total"
        and s.labels.get("endpoint") == "/v1/chat/completions"
    )


def _until_refused(url: str, within_s: float = 10.0) -> None:
    """Wait until nothing listens on `url`'s port any more (bounded)."""
    parts = httpx.URL(url)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((parts.host, parts.port or 80), timeout=1).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"{url} still accepts connections {within_s:g} s after SIGKILL")


def test_an_open_prefill_circuit_sends_nothing_more_to_the_decode() -> None:
    with twin_stack(
        router=True,
        router_kind=RouterKind.SMG,
        decode_args=["--disable-overlap-schedule", "--enable-metrics"],
    ) as stack:
        assert stack.router is not None
        chat_url = stack.router.url + "/v1/chat/completions"
        model = httpx.get(stack.decode.url + "/v1/models", timeout=5).json()["data"][0]["id"]
        chat = {
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "chat_template_kwargs": {"thinking": False},
        }
        assert stack.prefill.pid is not None
        os.killpg(stack.prefill.pid, signal.SIGKILL)  # its own session: the whole twin
        _until_refused(stack.prefill.url)  # gone, not dying: its port refuses
        statuses = []
        for _ in range(20):  # until the circuit opens: 2 requests (x4 dispatches) on 1.13.0
            statuses.append(httpx.post(chat_url, json=chat, timeout=30).status_code)
            if statuses[-1] == 503:
                break
        # The dispatches that fail before the circuit opens: 502 as a rule; a full run once saw
        # a 500 first (the request sent right after the SIGKILL), so both are failed dispatches.
        assert statuses[-1] == 503 and len(statuses) >= 2, statuses
        assert set(statuses[:-1]) <= {500, 502}, statuses
        sent = _chats_at_decode(stack)
        assert sent > 0  # the failing requests did reach the decode, before the circuit opened
        for _ in range(5):
            reply = httpx.post(chat_url, json=chat, timeout=30)
            assert reply.status_code == 503, reply.text
            assert "No available prefill workers (all circuits open" in reply.text, reply.text
        assert _chats_at_decode(stack) == sent  # open: refused before any dispatch to the decode
        # /workers still lists both: it shows registrations and health checks, not circuits.
        # Whether the prefill already reads unhealthy depends on when SMG's health check ran
        # (on an idle machine, not yet): asserted it made the test fail on a loaded one.
        workers = httpx.get(stack.router.url + "/workers", timeout=5).json()["workers"]
        assert len(workers) == 2, workers
