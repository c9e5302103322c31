"""A small OpenAI-compatible streaming server for the canary's own tests (not the twin).

Run: `python -m testing.programs.canary_server --port P [--config JSON]`. A global decode loop emits one
token to every active stream per step of `a_ms + b_ms * padded(batch)` (the seeds' law). Knobs
(config at start, or POST /_fake/config at run time): stall_after (tokens after which every new
stream goes silent), freeze (no stream advances; running stays > 0), corrupt ("cross_talk" or
"invalid_json" tool arguments), error_every (every Nth request gets HTTP 500), wedge_after_aborts
(freeze after that many aborts), no_done (end each stream after its finish_reason and usage
chunks without `data: [DONE]`, as some OpenAI-compatible servers do), rid_dropped (serve each
stream under `fake-<n>` whatever its body's `rid`, as SGLang does behind a router that drops
it), no_chunk_id (chunks carry no `id`: nothing tells the client which id serves its stream). GET /metrics serves SGLang's
gauge names and its decode progress counter (bumped every step); frozen, the gauges keep their
last values as SGLang 0.5.23's do when its scheduler loop is blocked. Like SGLang, each
stream is served under the body's `rid` (else `fake-<n>`), reported as the chunk `id`, and
POST /abort_request {"rid": ...} aborts that stream only (an unknown rid is a no-op 200). Each
`CALL <tool> <json>` line of the prompt is one call (parallel calls get indexes 0, 1, ...); a
`"stream": false` tool-call request gets the whole answer at once (the stream pairs).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import hashlib
import json
import re
import time
from typing import Any

from aiohttp import web

_CALL = re.compile(r"CALL\s+([A-Za-z_][\w.-]*)\s+(\{.*?\})\s*$", re.S | re.M)


class Stream:
    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.tokens = 0


class Fake:
    def __init__(self, config: dict[str, Any]) -> None:
        self.cfg = {
            "a_ms": 5.0,
            "b_ms": 0.5,
            "buckets": [],
            "stall_after": None,
            "freeze": False,
            "corrupt": None,
            "error_every": 0,
            "wedge_after_aborts": 0,
            "no_done": False,
            "rid_dropped": False,
            "no_chunk_id": False,
            **config,
        }
        self.active: dict[str, Stream] = {}
        self.seq = 0
        self.aborts = 0
        self.tokens_window: list[float] = []
        self.decode_tokens = 0  # sglang:realtime_tokens_total{mode="decode"}
        self.published_gen = 0.0  # gen_throughput as last published (frozen with the loop)
        self.last_args: str | None = None
        self.abort_requests: list[dict[str, Any]] = []  # bodies of POST /abort_request, for tests
        self.wake = asyncio.Event()

    def step_s(self, n: int) -> float:
        buckets = sorted(self.cfg["buckets"])
        i = bisect.bisect_left(buckets, n)
        padded = buckets[i] if buckets and i < len(buckets) else n
        step: float = (self.cfg["a_ms"] + self.cfg["b_ms"] * padded) / 1000.0
        return step

    async def decode_loop(self) -> None:
        while True:
            if self.cfg["freeze"]:
                await asyncio.sleep(0.05)
                continue
            if not self.active:
                self.wake.clear()
                await self.wake.wait()
                continue
            batch = list(self.active.values())
            await asyncio.sleep(self.step_s(len(batch)))
            now = time.monotonic()
            for s in batch:
                stall = self.cfg["stall_after"]
                if stall is not None and s.tokens >= stall:
                    continue
                s.tokens += 1
                s.queue.put_nowait("tick")
                self.tokens_window.append(now)
                self.decode_tokens += 1

    def abort(self, stream: Stream) -> None:
        self.aborts += 1
        if self.cfg["wedge_after_aborts"] and self.aborts >= self.cfg["wedge_after_aborts"]:
            self.cfg["freeze"] = True
        stream.queue.put_nowait(None)


def _chunk(
    rid: str, delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
) -> bytes:
    obj: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj = {"id": rid, "object": "chat.completion.chunk", "choices": [], "usage": usage}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _call_args(fake: Fake, raw: str) -> str:
    """The arguments sent for a call, corrupted as the `corrupt` knob says."""
    args = json.dumps(json.loads(raw))
    if fake.cfg["corrupt"] == "cross_talk" and fake.last_args:
        args, fake.last_args = fake.last_args, args
    else:
        fake.last_args = args
        if fake.cfg["corrupt"] == "invalid_json":
            args = args[: len(args) // 2] + '",,'
    return args


def _call(index: int, call_id: str, name: str, args: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


async def chat(request: web.Request) -> web.StreamResponse:
    fake: Fake = request.app["fake"]
    body = await request.json()
    fake.seq += 1
    if fake.cfg["error_every"] and fake.seq % fake.cfg["error_every"] == 0:
        return web.json_response({"object": "error", "message": "injected failure"}, status=500)
    messages = body.get("messages") or []
    user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
    calls = list(_CALL.finditer(user)) if body.get("tools") else []
    pieces: list[dict[str, Any]] = []
    if calls:
        whole = []
        for k, call in enumerate(calls):  # parallel calls: one index each
            args = _call_args(fake, call.group(2))
            whole.append(_call(k, f"call_{fake.seq}_{k}", call.group(1), args))
            pieces.append({"tool_calls": [_call(k, f"call_{fake.seq}_{k}", call.group(1), "")]})
            pieces += [
                {"tool_calls": [{"index": k, "function": {"arguments": args[i : i + 4]}}]}
                for i in range(0, len(args), 4)
            ]
        finish = "tool_calls"
        if body.get("stream") is False:  # the corruption suite's stream pairs
            message = {"role": "assistant", "content": None, "tool_calls": whole}
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return web.json_response({"id": f"fake-{fake.seq}", "choices": [choice]})
    else:
        seed = hashlib.sha256(user.encode()).hexdigest()
        n = int(body.get("max_tokens") or 16)
        pieces = [{"content": f" {seed[i % 60:i % 60 + 4]}"} for i in range(n)]
        finish = "length"
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    rid = None if fake.cfg["rid_dropped"] else body.get("rid")
    stream = Stream(str(rid or f"fake-{fake.seq}"))
    shown = "" if fake.cfg["no_chunk_id"] else stream.rid  # the chunks' `id` ("": none to read)
    fake.active[stream.rid] = stream
    fake.wake.set()
    sent = 0
    try:
        await resp.write(_chunk(shown, {"role": "assistant", "content": ""}))
        for piece in pieces:
            item = await stream.queue.get()
            if item is None:
                finish = "abort"
                break
            await resp.write(_chunk(shown, piece))
            sent += 1
        fake.active.pop(stream.rid, None)
        await resp.write(_chunk(shown, {}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            await resp.write(
                _chunk(
                    shown,
                    {},
                    usage={
                        "prompt_tokens": len(user.split()),
                        "completion_tokens": sent,
                        "total_tokens": sent + len(user.split()),
                    },
                )
            )
        if not fake.cfg["no_done"]:
            await resp.write(b"data: [DONE]\n\n")
    except (ConnectionResetError, asyncio.CancelledError):
        fake.abort(stream)
        raise
    finally:
        fake.active.pop(stream.rid, None)
    return resp


async def metrics(request: web.Request) -> web.Response:
    fake: Fake = request.app["fake"]
    now = time.monotonic()
    fake.tokens_window = [t for t in fake.tokens_window if now - t <= 1.0]
    if not fake.cfg["freeze"]:
        fake.published_gen = float(len(fake.tokens_window))
    labels = '{model_name="fake",engine_type="decode",tp_rank="0"}'
    mode = '{model_name="fake",engine_type="decode",tp_rank="0",mode="decode"}'
    text = (
        f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{labels} {len(fake.active)}\n"
        f"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{labels} 0\n"
        f"# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput{labels} {fake.published_gen}\n"
        f"# TYPE sglang:realtime_tokens_total counter\n"
        f"sglang:realtime_tokens_total{mode} {fake.decode_tokens}\n"
    )
    return web.Response(text=text, content_type="text/plain")


async def abort_request(request: web.Request) -> web.Response:
    fake: Fake = request.app["fake"]
    body = await request.json()
    fake.abort_requests.append(body)
    targets = (
        list(fake.active.values())
        if body.get("abort_all")
        else [s for s in [fake.active.get(str(body.get("rid") or ""))] if s is not None]
    )
    for s in targets:
        fake.active.pop(s.rid, None)
        fake.abort(s)
    return web.Response(text="")


async def abort_log(request: web.Request) -> web.Response:
    return web.json_response(request.app["fake"].abort_requests)


async def set_config(request: web.Request) -> web.Response:
    fake: Fake = request.app["fake"]
    fake.cfg.update(await request.json())
    fake.wake.set()
    return web.json_response(fake.cfg)


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})


def make_app(config: dict[str, Any]) -> web.Application:
    app = web.Application()
    app["fake"] = Fake(config)

    async def background(app: web.Application):  # type: ignore[no-untyped-def]
        task = asyncio.create_task(app["fake"].decode_loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(background)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/abort_request", abort_request)
    app.router.add_post("/_fake/config", set_config)
    app.router.add_get("/_fake/aborts", abort_log)
    app.router.add_get("/v1/models", models)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--config", default="{}")
    args = parser.parse_args()
    web.run_app(
        make_app(json.loads(args.config)),
        host="127.0.0.1",
        port=args.port,
        print=None,
        access_log=None,
    )


if __name__ == "__main__":
    main()
