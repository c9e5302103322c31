"""Requests over the context length, refused as SGLang 0.5.23 refuses them (twin/limits.py cites
the source): a 400 before any byte of a stream, SGLang's own message, and the limit on
/v1/models and /server_info where a client reads it (canary/limits.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dsv4ops.twin.formats import Job
from dsv4ops.twin.limits import MODEL_CONTEXT_LEN, refusal
from testing.twin import fake_bootstrap, twin_server

pytestmark = pytest.mark.slow


def _job(kind: str, prompt_tokens: int, max_tokens: int) -> Job:
    return Job(kind, "r", "m", True, False, prompt_tokens, max_tokens, 0)


def test_the_three_refusals_in_sglangs_order_and_words() -> None:
    assert refusal(_job("chat", 10, 100_000), 2048) == (
        "max_completion_tokens is too large: 100000.This model supports at most 2048 "
        "completion tokens."
    )
    assert refusal(_job("completion", 2048, 1), 2048) == (
        "The input (2048 tokens) is longer than the model's context length (2048 tokens)."
    )
    msg = refusal(_job("chat", 48, 2001), 2048)
    assert msg is not None and msg.startswith(
        "Requested token count exceeds the model's maximum context length of 2048 tokens. "
        "You requested a total of 2049 tokens: 48 tokens from the input messages and 2001"
    )
    assert refusal(_job("chat", 48, 2000), 2048) is None  # exactly full fits (`>` in SGLang)
    assert refusal(_job("chat", 10, 100_000), MODEL_CONTEXT_LEN) is None


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with twin_server(
        ["--disaggregation-mode", "decode", "--context-length", "2048"],
        env={"DSV4_TWIN_TIME_SCALE": "0.02"},
    ) as proc:
        yield proc.url


def _chat(url: str, max_tokens: int, **extra: Any) -> httpx.Response:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "write a list"}],
        "max_tokens": max_tokens,
        **fake_bootstrap(),
        **extra,
    }
    return httpx.post(url + "/v1/chat/completions", json=body, timeout=30)


def test_a_stream_over_the_context_is_a_400_with_sglangs_error_response(url: str) -> None:
    # issue 38: watch's probe stream asked max_tokens=100000 of a 2048-token model
    r = _chat(url, 100_000, stream=True)
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["object"] == "error" and body["code"] == 400
    assert body["type"] == "BadRequestError"
    assert "max_completion_tokens is too large: 100000" in body["message"]
    r = _chat(url, 2047)  # within the 2048 alone, not with its prompt
    assert r.status_code == 400
    assert "exceeds the model's maximum context length of 2048" in r.json()["message"]
    assert _chat(url, 16).status_code == 200


def test_generate_streams_its_refusal_as_an_event_and_the_limit_is_published(url: str) -> None:
    body = {"text": "hello", "sampling_params": {"max_new_tokens": 4096}, "stream": True}
    r = httpx.post(url + "/generate", json={**body, **fake_bootstrap()}, timeout=30)
    assert r.status_code == 200
    assert '"type": "invalid_request_error"' in r.text and r.text.endswith("data: [DONE]\n\n")
    r = httpx.post(
        url + "/generate", json={**body, "stream": False, **fake_bootstrap()}, timeout=30
    )
    assert r.status_code == 400 and "context length of 2048" in r.json()["error"]["message"]
    assert httpx.get(url + "/v1/models", timeout=5).json()["data"][0]["max_model_len"] == 2048
    info = httpx.get(url + "/server_info", timeout=5).json()
    assert info["context_length"] == 2048 and info["max_req_input_len"] == 2047
