"""The twin PD pair behind the real sglang-router 0.3.2: the HTTP API seen from outside."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.twin import (
    WEATHER_TOOL,
    TwinStack,
    assemble_chat_stream,
    http_status,
    sse_events,
    stream_chat,
    twin_server,
    twin_stack,
)

pytestmark = [pytest.mark.slow, pytest.mark.router]
BUCKETS = ["--cuda-graph-bs-decode", *[str(b) for b in range(32, 97, 8)]]


@pytest.fixture(scope="module")
def stack() -> Iterator[TwinStack]:
    with twin_stack(
        router=True,
        prefill_args=["--served-model-name", "dsv4-flash"],
        decode_args=[
            "--served-model-name",
            "dsv4-flash",
            "--enable-metrics",
            "--tool-call-parser",
            "deepseekv4",
            *BUCKETS,
        ],
        env={"DSV4_TWIN_TIME_SCALE": "0.05"},
    ) as s:
        yield s


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as c:
        yield c


def test_streaming_chat_with_tool_call_through_the_router(
    stack: TwinStack, client: httpx.Client
) -> None:
    body = {
        "model": "dsv4-flash",
        "tools": [WEATHER_TOOL],
        "max_tokens": 200,
        "messages": [
            {"role": "user", "content": 'CALL get_weather {"city": "Oslo", "nonce": "q7x"}'}
        ],
    }
    out = stream_chat(client, stack.router_url, body)
    assert out["name"] == "get_weather" and out["id"].startswith("call_")
    assert json.loads(out["arguments"]) == {"city": "Oslo", "nonce": "q7x"}
    assert out["finish"] == "tool_calls"
    kinds = {e["event"] for e in stack.events()}
    assert {"started", "ready", "peer_registered"} <= kinds


def test_output_is_the_same_alone_and_among_concurrent_requests(
    stack: TwinStack, client: httpx.Client
) -> None:
    def ask(text: str) -> dict[str, Any]:
        body = {
            "tools": [WEATHER_TOOL],
            "max_tokens": 100,
            "messages": [{"role": "user", "content": text}],
        }
        out = stream_chat(client, stack.router_url, body)
        out.pop("id")  # a fresh call id per request, as OpenAI does
        return out

    alone = ask("weather in Rome? nonce=r0")
    with ThreadPoolExecutor(12) as pool:
        crowd = list(pool.map(ask, [f"weather in Rome? nonce=r{i % 3}" for i in range(12)]))
    assert crowd[0] == alone and crowd[3] == alone
    assert json.loads(alone["arguments"])["nonce"] == "r0"


def test_non_streaming_chat_completions_and_generate(
    stack: TwinStack, client: httpx.Client
) -> None:
    r = client.post(
        f"{stack.router_url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6},
    )
    body = r.json()
    assert r.status_code == 200 and body["object"] == "chat.completion"
    assert (
        body["usage"]["completion_tokens"] == 6 and body["choices"][0]["finish_reason"] == "length"
    )
    r = client.post(
        f"{stack.router_url}/v1/completions",
        json={"model": "dsv4-flash", "prompt": "SAY all good", "max_tokens": 9},
    )
    assert r.json()["choices"][0]["text"] == "all good"
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    r = client.post(
        f"{stack.router_url}/generate",
        json={"text": "abc", "sampling_params": {"max_new_tokens": 3}},
    )
    meta = r.json()["meta_info"]
    assert r.status_code == 200 and meta["completion_tokens"] == 3
    assert meta["finish_reason"] == {"type": "length", "length": 3}
    with client.stream(
        "POST",
        f"{stack.router_url}/generate",
        json={"text": "abc", "stream": True, "sampling_params": {"max_new_tokens": 3}},
    ) as resp:
        events = sse_events(resp.iter_lines())
    assert events[-1] == "[DONE]" and events[-2]["text"] == r.json()["text"]


def test_streamed_usage_chunk_and_streamed_completions(
    stack: TwinStack, client: httpx.Client
) -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with client.stream("POST", f"{stack.router_url}/v1/chat/completions", json=body) as resp:
        events = sse_events(resp.iter_lines())
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 2
    body = {"model": "dsv4-flash", "prompt": "SAY x y", "max_tokens": 5, "stream": True}
    with client.stream("POST", f"{stack.router_url}/v1/completions", json=body) as resp:
        events = sse_events(resp.iter_lines())
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == "x y"
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


def test_info_endpoints_on_the_workers(stack: TwinStack, client: httpx.Client) -> None:
    for url in (stack.prefill.url, stack.decode.url):
        for path in ("/health", "/health_generate", "/ready"):
            assert client.get(url + path).status_code == 200
    info = client.get(f"{stack.decode.url}/server_info").json()
    state = info["internal_states"][0]
    assert state["decode_cuda_graph_bs"] == list(range(32, 97, 8))
    assert "last_gen_throughput" in state and info["disaggregation_mode"] == "decode"
    assert info["version"] == "0.5.23" and info["twin_kernel_package"] is None
    assert client.get(f"{stack.prefill.url}/get_server_info").json()["tp_size"] == 4
    model = client.get(f"{stack.decode.url}/model_info").json()
    assert model["served_model_name"] == "dsv4-flash" and model["tool_call_parser"] == "deepseekv4"
    assert (
        client.get(f"{stack.prefill.url}/get_model_info").json()["disaggregation_mode"] == "prefill"
    )
    models = client.get(f"{stack.decode.url}/v1/models").json()
    assert models["data"][0]["id"] == "dsv4-flash" and models["data"][0]["owned_by"] == "sglang"
    missing = client.get(f"{stack.decode.url}/v1/models/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    assert client.get(f"{stack.router_url}/v1/models").status_code == 200
    proxied = client.get(f"{stack.router_url}/get_model_info").json()  # router → first prefill
    assert proxied["disaggregation_mode"] == "prefill"
    assert client.post(f"{stack.decode.url}/flush_cache").text.startswith("Cache flushed.")
    assert client.post(f"{stack.router_url}/flush_cache").status_code == 200


def test_bad_chat_request_is_a_400_with_sglang_error_shape(
    stack: TwinStack, client: httpx.Client
) -> None:
    r = client.post(f"{stack.decode.url}/v1/chat/completions", json={"model": "x"})
    assert r.status_code == 400
    assert r.json()["object"] == "error" and r.json()["code"] == 400


def test_abort_request_by_rid_ends_only_that_stream_through_the_router(
    stack: TwinStack, client: httpx.Client
) -> None:
    """SGLang's AbortReq: {"rid", "abort_all": false} aborts one request; an unknown rid is a
    no-op 200. The router keeps `rid` in /generate bodies, so both workers know the request by it."""

    def body(rid: str, tokens: int) -> dict[str, Any]:
        return {
            "text": f"long {rid}",
            "rid": rid,
            "stream": True,
            "sampling_params": {"max_new_tokens": tokens},
        }

    with (
        client.stream("POST", f"{stack.router_url}/generate", json=body("keep-me", 400)) as keep,
        client.stream(
            "POST", f"{stack.router_url}/generate", json=body("abort-me", 100000)
        ) as resp,
    ):
        lines, keep_lines = resp.iter_lines(), keep.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        assert json.loads(first[5:])["meta_info"]["id"] == "abort-me"
        assert {"abort-me", "keep-me"} <= set(
            client.get(f"{stack.decode.url}/_twin/state").json()["inflight_rids"]
        )
        for url in (stack.prefill.url, stack.decode.url):
            for rid in ("abort-me", "no-such-request"):
                r = client.post(f"{url}/abort_request", json={"rid": rid, "abort_all": False})
                assert r.status_code == 200 and r.text == ""
        events = sse_events(lines)
        kept = sse_events(keep_lines)
    # FINISH_ABORT.to_json, as the real server answered an /abort_request (docs/twin.md)
    assert events[-2]["meta_info"]["finish_reason"] == {
        "type": "abort",
        "message": "Aborted",
        "status_code": None,
        "err_type": None,
    }
    assert kept[-2]["meta_info"]["finish_reason"]["type"] == "length"
    assert kept[-2]["meta_info"]["completion_tokens"] == 400
    bad = client.post(f"{stack.decode.url}/abort_request", json=["abort-me"])
    assert bad.status_code == 400


def test_router_drops_rid_from_chat_bodies_and_the_chunk_id_names_the_decode_request(
    stack: TwinStack, client: httpx.Client
) -> None:
    """Found with sglang-router 0.3.2: a chat request's `rid` does not reach the workers (the
    router re-serializes chat bodies without it); each worker serves the request under its own
    id, and the decode's is the chunk `id` the client receives: that is the id to abort by."""
    req = {
        "messages": [{"role": "user", "content": "long chat"}],
        "max_tokens": 100000,
        "stream": True,
        "rid": "my-chat-rid",
    }
    with client.stream("POST", f"{stack.router_url}/v1/chat/completions", json=req) as resp:
        lines = resp.iter_lines()
        chunk_id = json.loads(next(ln for ln in lines if ln.startswith("data:"))[5:])["id"]
        inflight = client.get(f"{stack.decode.url}/_twin/state").json()["inflight_rids"]
        assert chunk_id != "my-chat-rid" and chunk_id in inflight
        assert "my-chat-rid" not in inflight
        client.post(f"{stack.decode.url}/abort_request", json={"rid": chunk_id, "abort_all": False})
        events = sse_events(lines)
    assert assemble_chat_stream(events)["finish"] == "abort"


def test_metrics_parse_with_prometheus_client_and_only_with_enable_metrics(
    stack: TwinStack, client: httpx.Client
) -> None:
    client.post(
        f"{stack.router_url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "count me"}], "max_tokens": 4},
    )
    text = client.get(f"{stack.decode.url}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:num_decode_transfer_queue_reqs",
        "sglang:time_to_first_token_seconds",
        "sglang:e2e_request_latency_seconds",
    ):
        assert name in families, name
    running = families["sglang:num_running_reqs"].samples[0]
    assert running.labels["engine_type"] == "decode" and running.labels["tp_rank"] == "0"
    assert running.labels["model_name"] == "dsv4-flash"
    gen = [s for s in families["sglang:generation_tokens"].samples if s.name.endswith("_total")]
    assert sum(s.value for s in gen) >= 4
    assert client.get(f"{stack.prefill.url}/metrics").status_code == 404


def test_health_is_503_while_starting_then_200() -> None:
    env = {"DSV4_TWIN_MODEL_LOAD_S": "0.1", "DSV4_TWIN_WARMUP_S": "2.0"}
    with twin_server(["--disaggregation-mode", "decode"], env=env, wait=False) as proc:
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1] != 200):
            code = http_status(proc.url + "/health", timeout=5)
            if not seen or seen[-1] != code:
                seen.append(code)
            time.sleep(0.05)
        assert 503 in seen and seen[-1] == 200
        assert seen.index(503) < seen.index(200)


def test_sigkill_closes_the_port_and_the_router_marks_the_decode_unhealthy(
    client: httpx.Client,
) -> None:
    fast_health = ["--health-failure-threshold", "1", "--health-success-threshold", "1"]
    with twin_stack(
        router=True, router_args=fast_health, env={"DSV4_TWIN_TIME_SCALE": "0.05"}
    ) as s:
        s.kill("decode", signal.SIGKILL)
        assert http_status(s.decode.url + "/health", timeout=2) == 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and http_status(s.router_url + "/readiness") != 503:
            time.sleep(0.2)
        assert http_status(s.router_url + "/readiness") == 503
        workers = client.get(f"{s.router_url}/workers").json()["workers"]
        assert [w["is_healthy"] for w in workers if w["worker_type"] == "decode"] == [False]
        s.start("decode")
        s.wait_router_ready(20)
        r = client.post(
            f"{s.router_url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "back?"}], "max_tokens": 2},
        )
        assert r.status_code == 200
