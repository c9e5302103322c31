"""rawhttp, the streaming hot path, against a real TCP server on 127.0.0.1 that writes scripted bytes.

The server answers each request with a list of byte pieces, each in its own write with a pause in
between, so the client sees them in separate reads (chunk headers, events and CRLFs split at
awkward places). It counts connections, so keep-alive reuse is observable from outside.
"""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from collections.abc import Sequence

import pytest

from dsv4ops.canary import eventloop, rawhttp
from dsv4ops.canary import records as R
from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.errors import DsOpsError
from testing.canary import Script, ScriptedServer
from testing.ports import free_port

EV = b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n'
DONE = b"data: [DONE]\n\n"
HEAD_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_body(words: Sequence[str]) -> bytes:
    return b"".join(EV % w.encode() for w in words) + DONE


def run_requests(  # type: ignore[no-untyped-def]
    script: Script, n: int = 1, *, concurrency: int = 1, engine: str = "raw", **client_kw
) -> tuple[list[R.RequestRecord], ScriptedServer]:
    srv = ScriptedServer(script)

    async def main() -> list[R.RequestRecord]:
        async with (
            srv as url,
            ChatClient(url, connections=concurrency, engine=engine, **client_kw) as client,
        ):
            assert client.engine == engine
            sem = asyncio.Semaphore(concurrency)

            async def one(i: int) -> R.RequestRecord:
                async with sem:
                    return await client.stream({"messages": [], "i": i}, rid=f"r{i}")

            return list(await asyncio.gather(*(one(i) for i in range(n))))

    return eventloop.run(main(), kind="asyncio"), srv


def test_events_split_at_every_awkward_place_are_reassembled_in_order() -> None:
    body = sse_body(["alpha", "beta", "gamma", "delta"])
    framed = HEAD_CHUNKED + chunk(body[:30]) + chunk(body[30:]) + b"0\r\n\r\n"
    # every 7 bytes in its own write: splits the head, the chunk size lines, the CRLFs and events
    pieces: list[bytes | float | None] = []
    for i in range(0, len(framed), 7):
        pieces += [framed[i : i + 7], 0.002]
    [rec], _ = run_requests(lambda n, b: pieces)
    assert rec.ok, rec.error_detail
    assert rec.content == "alphabetagammadelta"
    assert len(rec.token_times) == 4 and rec.token_times == sorted(rec.token_times)
    assert rec.t_first == rec.token_times[0]


def test_many_chunks_in_one_read_and_chunk_extensions() -> None:
    events = [EV % w.encode() for w in ("a", "b", "c", "d")]
    framed = (
        HEAD_CHUNKED
        + b"".join(chunk(e) for e in events[:3])
        + b"%x;name=value\r\n%s\r\n" % (len(events[3]), events[3])
        + chunk(DONE)
        + b"0\r\n\r\n"
    )
    [rec], _ = run_requests(lambda n, b: [framed])
    assert rec.ok and rec.content == "abcd"
    # a trailer after the last chunk is read and ignored
    with_trailer = HEAD_CHUNKED + chunk(sse_body(["t"])) + b"0\r\nX-Checksum: 1\r\n\r\n"
    recs, srv = run_requests(lambda n, b: [with_trailer], n=2)
    assert all(r.ok and r.content == "t" for r in recs) and srv.connections == 1


def test_each_event_is_stamped_on_its_own_receipt() -> None:
    def script(n: int, b: bytes) -> list[bytes | float | None]:
        out: list[bytes | float | None] = [HEAD_CHUNKED]
        for w in ("a", "b", "c"):
            out += [chunk(EV % w.encode()), 0.05]
        return out + [chunk(DONE), b"0\r\n\r\n"]

    [rec], _ = run_requests(script)
    assert rec.ok
    gaps = [b - a for a, b in zip(rec.token_times, rec.token_times[1:], strict=False)]
    assert all(40e6 < g < 200e6 for g in gaps), gaps  # ~50 ms apart, as sent


def test_keep_alive_reuses_one_connection_for_sequential_requests() -> None:
    resp = HEAD_CHUNKED + chunk(sse_body(["x"])) + b"0\r\n\r\n"
    recs, srv = run_requests(lambda n, b: [resp], n=5, concurrency=1)
    assert all(r.ok and r.content == "x" for r in recs)
    assert srv.connections == 1 and len(srv.requests) == 5
    assert b"POST /v1/chat/completions HTTP/1.1" in srv.requests[0]
    assert json.loads(srv.requests[3].split(b"\r\n\r\n", 1)[1]) == {"messages": [], "i": 3}


def test_content_length_and_read_to_close_bodies() -> None:
    body = sse_body(["one", "two"])
    with_length = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    recs, srv = run_requests(lambda n, b: [with_length], n=2)
    assert all(r.ok and r.content == "onetwo" for r in recs) and srv.connections == 1

    to_close = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    recs, srv = run_requests(lambda n, b: [to_close, body[:20], 0.01, body[20:], None], n=2)
    assert all(r.ok and r.content == "onetwo" for r in recs)
    assert srv.connections == 2  # a body that ends at close cannot share its connection


def test_an_empty_body_returns_its_connection_to_the_pool_once() -> None:
    ok = HEAD_CHUNKED + chunk(sse_body(["x"])) + b"0\r\n\r\n"
    empty = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    recs, srv = run_requests(lambda n, b: [empty if n == 0 else ok, 0.01], n=6, concurrency=2)
    assert recs[0].error == R.ERR_TRUNCATED  # no events at all
    assert all(r.ok and r.content == "x" for r in recs[1:]), [r.error_detail for r in recs]
    assert srv.connections == 2  # one connection handed out twice would cross two streams


def test_bytes_on_an_idle_connection_retire_it() -> None:
    resp = HEAD_CHUNKED + chunk(sse_body(["x"])) + b"0\r\n\r\n"
    srv = ScriptedServer(lambda n, b: [resp, 0.02, b"HTTP/1.1 200 OK\r\n"] if n == 0 else [resp])

    async def main() -> list[R.RequestRecord]:
        async with srv as url, ChatClient(url, engine="raw") as client:
            first = await client.stream({"messages": []}, rid="a")
            await asyncio.sleep(0.2)  # the stray bytes arrive while the connection is idle
            return [first, await client.stream({"messages": []}, rid="b")]

    recs = eventloop.run(main())
    assert all(r.ok and r.content == "x" for r in recs), [r.error_detail for r in recs]
    assert srv.connections == 2


def test_connection_close_header_is_honoured() -> None:
    resp = (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunk(sse_body(["z"]))
        + b"0\r\n\r\n"
    )
    recs, srv = run_requests(lambda n, b: [resp, 0.05], n=3)
    assert all(r.ok for r in recs) and srv.connections == 3


def test_non_200_is_an_http_error_with_the_body() -> None:
    msg = b'{"error":"model overloaded"}'
    resp = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s" % (len(msg), msg)
    [rec], _ = run_requests(lambda n, b: [resp])
    assert rec.error == R.ERR_HTTP and rec.status == 503
    assert "HTTP 503" in rec.error_detail and "model overloaded" in rec.error_detail


def test_interim_100_continue_is_skipped() -> None:
    resp = b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD_CHUNKED + chunk(sse_body(["ok"])) + b"0\r\n\r\n"
    [rec], _ = run_requests(lambda n, b: [resp])
    assert rec.ok and rec.content == "ok"


def test_server_dying_mid_stream_is_a_disconnect_keeping_what_came() -> None:
    [rec], _ = run_requests(lambda n, b: [HEAD_CHUNKED, chunk(EV % b"partial"), 0.02, None])
    assert rec.error == R.ERR_DISCONNECT and "ServerDisconnected" in rec.error_detail
    assert rec.content == "partial"  # kept for diagnosis


def test_stale_keep_alive_connection_is_retried_once_on_a_fresh_one() -> None:
    resp = HEAD_CHUNKED + chunk(sse_body(["ok"])) + b"0\r\n\r\n"

    def script(n: int, b: bytes) -> list[bytes | float | None]:
        # The first answer keeps the connection; the server then drops it on the next request
        # without a byte: the client must resend on a new connection, not report an error.
        return [resp] if n != 1 else [None]

    recs, srv = run_requests(script, n=3)
    assert [r.ok for r in recs] == [True, True, True], [r.error_detail for r in recs]
    assert srv.connections == 2 and len(srv.requests) == 4


def test_garbage_response_is_reported_not_raised() -> None:
    [rec], _ = run_requests(lambda n, b: [b"SSH-2.0-OpenSSH_9.2\r\n\r\n"])
    assert rec.error == R.ERR_DISCONNECT and "not an HTTP/1.x response" in rec.error_detail

    [rec], _ = run_requests(lambda n, b: [HEAD_CHUNKED, b"zz\r\n"])
    assert rec.error == R.ERR_DISCONNECT and "bad chunk size" in rec.error_detail


def test_connection_refused_is_a_connect_error() -> None:
    async def main() -> R.RequestRecord:
        async with ChatClient(f"http://127.0.0.1:{free_port()}", engine="raw") as client:
            return await client.stream({"messages": []}, rid="x")

    rec = eventloop.run(main())
    assert rec.error == R.ERR_CONNECT


def test_total_timeout_is_a_timeout_error() -> None:
    [rec], _ = run_requests(lambda n, b: [HEAD_CHUNKED, chunk(EV % b"a"), 2.0], total_timeout_s=0.3)
    assert rec.error == R.ERR_TIMEOUT and rec.content == "a"


def test_cancelling_a_stream_closes_its_socket_a_client_disconnect() -> None:
    srv = ScriptedServer(lambda n, b: [HEAD_CHUNKED] + [chunk(EV % b"t"), 0.02] * 200)

    async def main() -> R.RequestRecord:
        async with srv as url, ChatClient(url, engine="raw") as client:
            sink: list[R.RequestRecord] = []
            task = asyncio.create_task(client.stream({"messages": []}, rid="c", sink=sink))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):  # the server sees the disconnect on its next write
                if srv.disconnects:
                    break
                await asyncio.sleep(0.02)
            return sink[0]

    rec = eventloop.run(main())
    assert rec.error == R.ERR_CANCELLED and rec.content.startswith("tt")
    assert srv.disconnects == 1


def test_engine_choice() -> None:
    assert ChatClient("http://127.0.0.1:1").engine == "raw"
    assert ChatClient("https://example.invalid").engine == "aiohttp"
    assert ChatClient("http://u:p@127.0.0.1:1").engine == "aiohttp"  # credentials: aiohttp's auth
    assert ChatClient("http://127.0.0.1:1", engine="aiohttp").engine == "aiohttp"
    with pytest.raises(ValueError, match="plain http"):
        ChatClient("https://example.invalid", engine="raw")
    assert rawhttp.StreamingHttp.supports("http://[::1]:8000")


def test_event_loop_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    async def name() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert eventloop.run(name(), kind="asyncio").startswith("asyncio")
    assert eventloop.run(name()).startswith("uvloop")  # the default where uvloop is installed
    monkeypatch.setenv("DSV4OPS_EVENT_LOOP", "asyncio")
    assert eventloop.run(name()).startswith("asyncio")
    monkeypatch.setenv("DSV4OPS_EVENT_LOOP", "trio")
    with pytest.raises(DsOpsError, match="uvloop or asyncio"):
        eventloop.loop_factory()


def test_an_unknown_event_loop_is_a_clear_error_and_the_canary_runs_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in DSV4OPS_EVENT_LOOP was an internal error (exit 3, a crash report) and a
    "coroutine was never awaited" warning: it is a refusal (exit 1) that says what is wanted."""
    from dsv4ops.cli import main

    monkeypatch.setenv("DSV4OPS_EVENT_LOOP", "trio")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["canary", "--suite", "smoke", "--url", "http://127.0.0.1:9"]) == 1
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], caught
    err = capsys.readouterr().err
    assert "DSV4OPS_EVENT_LOOP='trio': expected uvloop or asyncio" in err, err
    assert "unset it for the default (uvloop)" in err and "internal error" not in err, err


# -- how a stream ends, the same on both engines (aiohttp serves https and credentialed URLs) ------
BOTH_ENGINES = pytest.mark.parametrize("engine", ["raw", "aiohttp"])
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\n'
NO_DONE = b"".join(EV % w for w in (b"a", b"b", b"c")) + FINISH + USAGE  # what some servers send


@BOTH_ENGINES
def test_a_stream_that_ends_on_its_finish_reason_without_done_is_complete(engine: str) -> None:
    chunked = HEAD_CHUNKED + chunk(NO_DONE) + b"0\r\n\r\n"
    to_close = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    scripts: tuple[list[bytes | float | None], ...] = ([chunked], [to_close, NO_DONE, 0.01, None])
    for pieces in scripts:

        def script(
            n: int, b: bytes, s: list[bytes | float | None] = pieces
        ) -> list[bytes | float | None]:
            return s

        [rec], _ = run_requests(script, engine=engine)
        assert rec.ok, (rec.error, rec.error_detail)
        assert rec.content == "abc" and rec.output_tokens == 3 and rec.finish_reason == "stop"
        assert not rec.done and rec.ended_without_done  # said so, not hidden


@BOTH_ENGINES
def test_a_stream_cut_mid_answer_is_still_truncated(engine: str) -> None:
    # the body ends cleanly, but with neither a finish_reason nor [DONE]: the answer was cut
    cut = HEAD_CHUNKED + chunk(EV % b"a" + EV % b"b") + b"0\r\n\r\n"
    [rec], _ = run_requests(lambda n, b: [cut], engine=engine)
    assert rec.error == R.ERR_TRUNCATED and rec.content == "ab"
    assert "finish_reason" in rec.error_detail


@BOTH_ENGINES
def test_a_connection_lost_after_the_finish_reason_is_a_disconnect(engine: str) -> None:
    # chunked framing never finished: the transport broke, whatever the payload said
    [rec], _ = run_requests(lambda n, b: [HEAD_CHUNKED, chunk(NO_DONE), 0.02, None], engine=engine)
    assert rec.error == R.ERR_DISCONNECT and rec.content == "abc"


@BOTH_ENGINES
def test_a_request_cancelled_before_it_was_sent_is_cancelled_not_completed(engine: str) -> None:
    srv = ScriptedServer(lambda n, b: [HEAD_CHUNKED + chunk(sse_body(["x"])) + b"0\r\n\r\n"])

    async def main() -> R.RequestRecord:
        async with srv as url, ChatClient(url, engine=engine) as client:
            sink: list[R.RequestRecord] = []
            task = asyncio.create_task(client.stream({"messages": []}, rid="early", sink=sink))
            await asyncio.sleep(0)  # the outer coroutine starts and creates its inner task...
            task.cancel()  # ...which is cancelled before it ever runs
            with pytest.raises(asyncio.CancelledError):
                await task
            return sink[0]

    rec = eventloop.run(main(), kind="asyncio")
    assert not rec.ok and rec.cancelled and rec.t_send == 0 and rec.t_end
    assert srv.requests == []
