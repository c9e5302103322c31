"""Requests the router shapes into batches: a list of prompts, and n > 1 (real router 0.3.2)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from testing.twin import TwinStack, sse_events, twin_server, twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]
SCALE = 0.05
# 20 model s of waiting/bootstrap timeout = 1 s wall
ENV = {
    "DSV4_TWIN_TIME_SCALE": str(SCALE),
    "DSV4_TWIN_WAITING_TIMEOUT_S": "20",
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "20",
}


@pytest.fixture(scope="module")
def stack() -> Iterator[TwinStack]:
    with twin_stack(router=True, router_args=["--disable-retries"], env=ENV) as s:
        yield s


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as c:
        yield c


def test_a_list_of_prompts_gets_one_choice_per_prompt_each_with_its_own_transfer(
    stack: TwinStack, client: httpx.Client
) -> None:
    single = [
        client.post(
            f"{stack.router_url}/v1/completions", json={"model": "m", "prompt": p, "max_tokens": 5}
        ).json()["choices"][0]["text"]
        for p in ("first prompt", "second prompt")
    ]
    r = client.post(
        f"{stack.router_url}/v1/completions",
        json={"model": "m", "prompt": ["first prompt", "second prompt"], "max_tokens": 5},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert [c["text"] for c in body["choices"]] == single  # each answered for its own prompt
    assert body["usage"]["completion_tokens"] == 10
    # the router sent one room per prompt; both transfers happened
    state = client.get(f"{stack.decode.url}/_twin/state").json()
    assert state["peers"] and not state["inflight_rids"]


def test_a_streamed_list_of_prompts_numbers_its_chunks_by_prompt(
    stack: TwinStack, client: httpx.Client
) -> None:
    with client.stream(
        "POST",
        f"{stack.router_url}/v1/completions",
        json={"model": "m", "prompt": ["a b", "c d"], "max_tokens": 3, "stream": True},
    ) as r:
        assert r.status_code == 200
        chunks = [e for e in sse_events(r.iter_lines()) if isinstance(e, dict)]
    finishes = {
        c["choices"][0]["index"]: c["choices"][0]["finish_reason"]
        for c in chunks
        if c["choices"] and c["choices"][0]["finish_reason"]
    }
    assert finishes == {0: "length", 1: "length"}


def test_n_2_in_pd_mode_hangs_until_the_waiting_timeout_as_in_0_5_23(
    stack: TwinStack, client: httpx.Client
) -> None:
    # 0.5.23's tokenizer manager gives every sample its prompt's bootstrap room, after the
    # prefix-caching request already used it: the samples wait in WaitingForInput and fail.
    t0 = time.monotonic()
    r = client.post(
        f"{stack.router_url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 3},
    )
    took = time.monotonic() - t0
    assert r.status_code == 500  # SGLang's own answer after the timeout, not a parser crash
    assert "KVPoll.WaitingForInput" in r.text
    assert took >= 20 * SCALE * 0.9
    failed = [
        e
        for e in stack.events()
        if e["event"] == "transfer_failed"
        and e.get("cause") == "parallel samples share the bootstrap room"
    ]
    assert {e["side"] for e in failed} == {"decode", "prefill"}
    # the pair itself is fine afterwards
    ok = client.post(
        f"{stack.router_url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "SAY fine"}]},
    )
    assert ok.json()["choices"][0]["message"]["content"] == "fine"


def test_n_2_without_pd_answers_two_choices() -> None:
    with twin_server([], env={"DSV4_TWIN_TIME_SCALE": str(SCALE)}) as proc:
        r = httpx.post(
            f"{proc.url}/v1/chat/completions",
            timeout=30,
            json={"messages": [{"role": "user", "content": "SAY two"}], "n": 2},
        )
        assert r.status_code == 200
        choices = r.json()["choices"]
        assert [c["index"] for c in choices] == [0, 1]
        assert [c["message"]["content"] for c in choices] == ["two", "two"]
        r = httpx.post(
            f"{proc.url}/v1/completions", timeout=30, json={"prompt": ["x", ""], "max_tokens": 2}
        )
        assert r.status_code == 400 and "Prompt cannot be empty" in r.text
