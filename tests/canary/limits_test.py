"""The server's limits as the judges read and use them (canary/limits.py, canary/reach.py):
every request sized to what the server will serve, its refusals unwrapped to its own words,
the reachability check retried rather than failing a gate on one lost request (issue 38)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import pytest

from dsv4ops.canary.limits import (
    MIN_COMPLETION_TOKENS,
    TEMPLATE_ALLOWANCE_TOKENS,
    ServerLimits,
    server_message,
)
from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.reach import REACH_REFUSED_TRIES, read_limits, require_reachable
from dsv4ops.errors import CanaryError
from dsv4ops.jsontypes import JSONObject
from testing.twin import fake_bootstrap, twin_server


def _body(max_tokens: int, text: str = "hi") -> JSONObject:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def _prompt_bytes(body: JSONObject) -> int:
    return len(json.dumps([body.get("messages"), None, None]).encode())


def test_fit_lowers_max_tokens_to_the_room_beside_the_prompt_and_says_what_was_asked() -> None:
    limits = ServerLimits(context_length=2048)
    body = _body(100_000)
    sent, asked = limits.fit(body)
    room = 2048 - _prompt_bytes(body) - TEMPLATE_ALLOWANCE_TOKENS
    assert asked == 100_000 and sent["max_tokens"] == room
    assert body["max_tokens"] == 100_000  # the caller's body is not changed
    # within the room: sent as asked, nothing recorded
    assert limits.fit(_body(room)) == (_body(room), None)


def test_fit_leaves_alone_what_it_cannot_size() -> None:
    # no limit read: nothing to size by
    assert ServerLimits().fit(_body(100_000)) == (_body(100_000), None)
    # a prompt that leaves less than MIN_COMPLETION_TOKENS goes as asked: the refusal is the
    # server's to give and the judge's to report, never a silently shrunk 1-token request
    long = _body(64, "x" * 2048)
    assert ServerLimits(context_length=2048).fit(long) == (long, None)
    assert MIN_COMPLETION_TOKENS > 1
    # a body without an integer max_tokens is not invented one
    no_max: JSONObject = {"model": "m", "messages": []}
    assert ServerLimits(context_length=2048).fit(no_max) == (no_max, None)


def test_server_message_unwraps_every_shape_the_box_answers_with() -> None:
    msg = "max_completion_tokens is too large: 4096.This model supports at most 2048"
    sglang = json.dumps({"object": "error", "message": msg, "type": "BadRequestError"})
    generate = json.dumps({"error": {"message": msg}})
    # sglang-router 0.3.2 re-wraps a worker's refusal of a PD stream (measured): not JSON
    router = "data: {'error': {\"message\":" + sglang[: len(sglang) // 2 + 40]
    for text in (sglang, generate, router):
        assert server_message(text).startswith("max_completion_tokens is too large: 4096")
    assert server_message('{"message": "say \\"hi\\""}') == 'say "hi"'
    assert server_message("  upstream\n  timed out ") == "upstream timed out"


@pytest.fixture(scope="module")
def decode_url() -> Iterator[str]:
    with twin_server(
        [
            "--disaggregation-mode",
            "decode",
            "--context-length",
            "2048",
            "--max-running-requests",
            "24",
        ],
        env={"DSV4_TWIN_TIME_SCALE": "0.02"},
    ) as proc:
        yield proc.url


async def _read(url: str, workers: list[str]) -> ServerLimits:
    async with ChatClient(url) as client:
        return await read_limits(client, workers)


def test_read_limits_takes_the_workers_context_and_running_cap(decode_url: str) -> None:
    limits = asyncio.run(_read(decode_url, [decode_url, decode_url + "/"]))
    assert limits.context_length == 2048 and limits.max_running_requests == 24
    assert "2 worker(s)" in limits.source
    # the decode's own, recorded by a sweep (sglang#40442: its graph width follows it)
    assert limits.decode_context() == {"context_length": 2048, "explicit": True}
    unknown = asyncio.run(_read(decode_url, []))
    assert unknown.context_length is None and "unknown" in unknown.source


def test_a_sized_stream_is_served_where_the_asked_one_is_refused(decode_url: str) -> None:
    async def go() -> tuple[str | None, str | None, object]:
        async with ChatClient(decode_url) as client:
            body = {**_body(100_000), "stream": True, **fake_bootstrap()}
            refused = await client.stream(body, rid="asked")
            client.limits = await read_limits(client, [decode_url])
            served = await client.stream(body, rid="sized")
            return refused.error_detail, served.error, served.extra.get("max_tokens_asked")

    refused_detail, served_error, asked = asyncio.run(go())
    # the refusal is reported in the server's words, not its envelope
    assert refused_detail is not None and "max_completion_tokens is too large" in refused_detail
    assert "{" not in refused_detail
    assert served_error is None and asked == 100_000


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_reachability_gives_up_on_a_closed_port_after_its_refused_tries() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"

    async def go() -> None:
        async with ChatClient(url) as client:
            await require_reachable(client)

    with pytest.raises(CanaryError) as e:
        asyncio.run(go())
    assert f"{REACH_REFUSED_TRIES} tries" in str(e.value) and url in str(e.value)


def test_reachability_passes_once_the_router_answers(decode_url: str) -> None:
    async def go() -> None:
        async with ChatClient(decode_url) as client:
            await require_reachable(client)

    asyncio.run(go())


def test_one_lost_request_does_not_fail_the_gate() -> None:
    # issue 38: one /v1/models request never reached the router 6 s after the probe passed,
    # and the deploy rolled back; the identical retry passed
    seen: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(1)
        await reader.readuntil(b"\r\n\r\n")
        if len(seen) > 1:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
            await writer.drain()
        writer.close()  # the first: dropped without a reply

    async def go() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, ChatClient(f"http://127.0.0.1:{port}") as client:
            await require_reachable(client)

    asyncio.run(go())
    assert len(seen) == 2


def test_a_decode_started_without_a_context_length_is_recorded_as_the_models_own() -> None:
    """What a sweep records when the decode left --context-length to the model (sglang#40442)."""
    with twin_server(
        ["--disaggregation-mode", "decode"], env={"DSV4_TWIN_TIME_SCALE": "0.02"}
    ) as p:
        limits = asyncio.run(_read(p.url, [p.url]))
    assert limits.decode_context() == {"context_length": 1048576, "explicit": False}
