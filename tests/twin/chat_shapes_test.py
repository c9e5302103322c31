"""Chat responses as SGLang 0.5.23 writes them with --tool-call-parser deepseekv4 and
--reasoning-parser deepseek-v4 (serving_chat.py, sse_utils.py), seen over HTTP from one twin."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dsv4ops.twin.dsml import render_call, tokens
from dsv4ops.twin.recipe import stream_pieces
from testing.twin import WEATHER_TOOL, fake_bootstrap, sse_events, twin_server

pytestmark = pytest.mark.slow
PARSERS = ["--tool-call-parser", "deepseekv4", "--reasoning-parser", "deepseek-v4"]
CALL = 'CALL get_weather {"city": "Oslo", "nonce": "q7x"}'
THINK = {"chat_template_kwargs": {"thinking": True}}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    env = {"DSV4_TWIN_TIME_SCALE": "0.02", "DSV4_TWIN_REASONING_TOKENS": "6"}
    with twin_server(["--disaggregation-mode", "decode", *PARSERS], env=env) as proc:
        yield proc.url


@pytest.fixture(scope="module")
def bare_url() -> Iterator[str]:
    with twin_server(
        ["--disaggregation-mode", "decode"], env={"DSV4_TWIN_TIME_SCALE": "0.02"}
    ) as p:
        yield p.url


def _stream(url: str, content: str, **extra: Any) -> list[Any]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 300,
        **fake_bootstrap(),
        **extra,
    }
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    return events[:-1]


def _deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0]["delta"] for e in events if e["choices"]]


def test_a_tool_call_streams_piece_by_piece_as_0_5_23_serves_deepseekv4(url: str) -> None:
    # 0.5.23 serves deepseekv4 through deepseek-recipe (twin/recipe.py): a header piece with the
    # id and name, then the arguments as the invoke is decoded, one chunk a piece
    events = _stream(url, CALL, tools=[WEATHER_TOOL])
    with_calls = [e for e in events if e["choices"] and "tool_calls" in e["choices"][0]["delta"]]
    assert len(with_calls) > 5
    pieces = []
    for chunk in with_calls:
        assert list(chunk) == ["id", "object", "created", "model", "choices", "usage"]
        assert chunk["usage"] is None
        delta = chunk["choices"][0]["delta"]
        assert list(delta) == ["role", "content", "reasoning_content", "tool_calls"]
        assert delta["content"] is None and delta["role"] is None
        (piece,) = delta["tool_calls"]
        assert list(piece) == ["id", "index", "type", "function"] and piece["index"] == 0
        assert piece["type"] == "function"
        pieces.append(piece)
    header, *rest = pieces
    assert re.fullmatch(r"call_[0-9a-f]{24}", header["id"])
    assert header["function"] == {"name": "get_weather", "arguments": ""}
    assert all(p["id"] is None and p["function"]["name"] is None for p in rest)
    joined = "".join(p["function"]["arguments"] for p in rest)
    assert joined == '{"city": "Oslo", "nonce": "q7x"}'
    # the pieces are those SGLang's recipe parser makes of the call's tokens
    markup = render_call("get_weather", {"city": "Oslo", "nonce": "q7x"})
    want = [p for step in stream_pieces(tokens(markup)) for p in step]
    assert [(p["index"], p["function"]["name"], p["function"]["arguments"]) for p in pieces] == [
        (w.index, w.name, w.arguments) for w in want
    ]
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    # the role chunk, the pieces, the finish and usage: the rest of the DSML is held
    assert len(events) == 3 + len(pieces)
    usage = events[-1]["usage"]
    assert usage["completion_tokens"] > 20 and usage["reasoning_tokens"] == 0


def test_a_parser_the_recipe_does_not_serve_sends_the_call_in_one_delta() -> None:
    # any other --tool-call-parser keeps the detector's shape: one delta when the invoke closes
    env = {"DSV4_TWIN_TIME_SCALE": "0.02"}
    args = ["--disaggregation-mode", "decode", "--tool-call-parser", "qwen"]
    with twin_server(args, env=env) as proc:
        events = _stream(proc.url, CALL, tools=[WEATHER_TOOL])
    with_calls = [e for e in events if e["choices"] and "tool_calls" in e["choices"][0]["delta"]]
    assert len(with_calls) == 1
    (call,) = with_calls[0]["choices"][0]["delta"]["tool_calls"]
    assert call["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Oslo", "nonce": "q7x"}',
    }


def test_content_chunks_carry_reasoning_content_null_and_thinking_streams_it_first(
    url: str,
) -> None:
    plain = _deltas(_stream(url, "SAY hello there"))
    assert plain[0] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert plain[1] == {"reasoning_content": None, "content": "hello"}
    thought = _stream(url, "SAY hello there", **THINK)
    deltas = _deltas(thought)
    reasoning = [d for d in deltas if d.get("reasoning_content")]
    assert len(reasoning) == 6 and all(list(d) == ["reasoning_content"] for d in reasoning)
    first_text = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert first_text > deltas.index(reasoning[-1])
    assert "".join(d.get("content") or "" for d in deltas) == "hello there"
    usage = thought[-1]["usage"]
    assert usage["reasoning_tokens"] == 6 and usage["completion_tokens"] == 6 + 1 + 2
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 6}


def test_reasoning_can_use_up_max_tokens_then_no_call_and_finish_length(url: str) -> None:
    events = _stream(url, CALL, tools=[WEATHER_TOOL], max_tokens=10, **THINK)
    deltas = _deltas(events)
    assert not any("tool_calls" in d for d in deltas)
    assert not any(d.get("content") for d in deltas)
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 10


def test_thinking_is_off_unless_asked_and_without_a_reasoning_parser_it_is_content(
    url: str, bare_url: str
) -> None:
    assert not any(d.get("reasoning_content") for d in _deltas(_stream(url, "SAY hi")))
    raw = _deltas(_stream(bare_url, "SAY hi", **THINK))
    text = "".join(d.get("content") or "" for d in raw)
    assert "</think>" in text and text.endswith("hi")
    assert not any(d.get("reasoning_content") for d in raw)


def test_without_a_tool_call_parser_the_dsml_is_content_and_no_call(bare_url: str) -> None:
    events = _stream(bare_url, CALL, tools=[WEATHER_TOOL])
    content = "".join(d.get("content") or "" for d in _deltas(events))
    assert '<｜DSML｜invoke name="get_weather">' in content
    assert not any("tool_calls" in d for d in _deltas(events))
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


def test_non_streaming_tool_call_and_reasoning(url: str) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": CALL}],
        "tools": [WEATHER_TOOL],
        "max_tokens": 300,
        **fake_bootstrap(),
        **THINK,
    }
    out = httpx.post(url + "/v1/chat/completions", json=body, timeout=30).json()
    choice = out["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls" and message["content"] == ""
    assert choice["matched_stop"] is None  # dropped for calls (the real server: null here)
    streamed = [
        e["choices"][0]
        for e in _stream(url, CALL, tools=[WEATHER_TOOL])
        if e["choices"] and e["choices"][0]["finish_reason"]
    ]
    assert [c["matched_stop"] for c in streamed] == [1]  # the stream keeps the EOS id
    assert message["reasoning_content"] and len(message["reasoning_content"].split()) == 6
    (call,) = message["tool_calls"]
    assert re.fullmatch(r"call_[0-9a-f]{24}", call["id"]) and call["index"] == 0
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo", "nonce": "q7x"}
    assert out["usage"]["reasoning_tokens"] == 6


def test_hazard_shapes_are_set_at_run_time_and_rejected_when_unknown(url: str) -> None:
    r = httpx.post(
        url + "/_twin/hazard",
        json={"hazard": "corrupt", "state": "auto", "shapes": ["cross_talk"]},
        timeout=5,
    )
    assert r.status_code == 200 and r.json()["corrupt_shapes"] == ["cross_talk"]
    bad = httpx.post(
        url + "/_twin/hazard",
        json={"hazard": "corrupt", "state": "auto", "shapes": ["bogus"]},
        timeout=5,
    )
    assert bad.status_code == 400 and "choose one or more of" in bad.json()["error"]
    state = httpx.get(url + "/_twin/state", timeout=5).json()
    assert state["corrupt_shapes"] == ["cross_talk"]  # the rejected request changed nothing
    stream = {"hazard": "stream_tools", "state": "off", "shapes": ["calls_in_one_delta"]}
    r = httpx.post(url + "/_twin/hazard", json=stream, timeout=5)
    assert r.status_code == 200 and r.json()["stream_tools_shapes"] == ["calls_in_one_delta"]
    assert r.json()["corrupt_shapes"] == ["cross_talk"]
    wedge = httpx.post(
        url + "/_twin/hazard", json={"hazard": "wedge", "state": "off", "shapes": ["x"]}, timeout=5
    )
    assert wedge.status_code == 400 and "has no shapes" in wedge.json()["error"]


def test_a_stop_string_ends_the_answer_with_finish_stop_and_matched_stop(bare_url: str) -> None:
    """As real SGLang 0.5.23 answered through the real router (docs/twin.md, "Measured against
    the real server"): the finish chunk's delta holds only reasoning_content, the text is cut
    before the stop string, completion_tokens counts through it; a natural end reports the EOS
    token's id."""
    events = _stream(bare_url, "SAY alpha beta gamma delta epsilon", stop=[" delta"])
    content = "".join(d.get("content") or "" for d in _deltas(events))
    finish = [e["choices"][0] for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert content == "alpha beta gamma"
    assert finish == [
        {
            "index": 0,
            "delta": {"reasoning_content": None},
            "logprobs": None,
            "finish_reason": "stop",
            "matched_stop": " delta",
        }
    ]
    assert events[-1]["usage"]["completion_tokens"] == 4
    body = {
        "text": "SAY alpha beta gamma",
        "sampling_params": {"max_new_tokens": 50, "stop": "gamma"},
        **fake_bootstrap(),
    }
    meta = httpx.post(bare_url + "/generate", json=body, timeout=30).json()["meta_info"]
    assert meta["finish_reason"] == {"type": "stop", "matched": "gamma"}
    natural = _stream(bare_url, "SAY alpha beta")
    assert [e["choices"][0]["matched_stop"] for e in natural if e["choices"]][-1] == 1


def test_logprobs_have_the_shapes_real_sglang_answered(bare_url: str) -> None:
    """Chat, completions and /generate as the real 0.5.23 server answered `logprobs` on CPU
    (tools/sglang-cpu/observed/pd-cpu/*logprobs*): per-token entries, top alternatives, and
    null on the role and finish chunks."""
    events = _stream(bare_url, "SAY alpha beta", logprobs=True, top_logprobs=2)
    lps = [e["choices"][0]["logprobs"] for e in events if e["choices"]]
    assert lps[0] is None and lps[-1] is None  # role chunk, finish chunk
    for entry_set, delta in zip(lps[1:-1], _deltas(events)[1:-1], strict=True):
        (entry,) = entry_set["content"]
        assert set(entry) == {"token", "bytes", "logprob", "top_logprobs"}
        assert entry["token"] == delta["content"] and entry["bytes"] == list(
            entry["token"].encode()
        )
        assert (
            len(entry["top_logprobs"]) == 2 and entry["top_logprobs"][0]["token"] == entry["token"]
        )
        assert entry["logprob"] <= 0.0
    body = {
        "model": "m",
        "prompt": "SAY alpha beta",
        "max_tokens": 5,
        "logprobs": 2,
        **fake_bootstrap(),
    }
    choice = httpx.post(bare_url + "/v1/completions", json=body, timeout=30).json()["choices"][0]
    got = choice["logprobs"]
    assert set(got) == {"text_offset", "token_logprobs", "tokens", "top_logprobs"}
    assert "".join(got["tokens"]) == choice["text"] and set(got["text_offset"]) == {-1}
    body = {
        "text": "SAY alpha beta",
        "sampling_params": {"max_new_tokens": 5},
        "return_logprob": True,
        "top_logprobs_num": 2,
        **fake_bootstrap(),
    }
    out = httpx.post(bare_url + "/generate", json=body, timeout=30).json()
    meta = out["meta_info"]
    assert [t[1] for t in meta["output_token_logprobs"]] == out["output_ids"]
    assert meta["output_token_logprobs_length"] == len(out["output_ids"])
    assert all(len(t) == 2 for t in meta["output_top_logprobs"])
    plain = httpx.post(bare_url + "/v1/completions", json={**body, "prompt": "x"}, timeout=30)
    assert plain.json()["choices"][0]["logprobs"] is None  # not asked for
