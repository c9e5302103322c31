"""Batched generation requests: a list of prompts, or `n > 1`, answered as SGLang 0.5.23 does.

The choices come back in prompt-major order (choice i*n + j is sample j of prompt i), each
sequence under its own rid; the usage counts each prompt once and every sequence's completion
(`UsageProcessor.calculate_response_usage`). A non-streamed batch fails as a whole when one
sequence fails (the tokenizer manager gathers them); a streamed one sends an error chunk and
stops. What the samples of `n > 1` do to PD transfers is modelled in `TwinServer.prepare`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import replace
from typing import Literal

from aiohttp import web

from dsv4ops.jsontypes import JSONValue

from .engine import Req, StreamEvent
from .formats import FORMATS, error_body, sse
from .parse import Batch
from .pd import TransferError
from .server import TwinServer, not_ready


def _index(chunk: bytes, index: int, kind: str) -> bytes:
    """Re-number a single-sequence SSE chunk as choice `index` of the batch."""
    body = json.loads(chunk.decode()[len("data: ") :].strip())
    if kind == "generate":
        body["index"] = index
    for choice in body.get("choices") or []:
        choice["index"] = index
    return sse(body)


def _usage(batch: Batch, reqs: list[Req]) -> dict[str, int | None]:
    prompt = sum(s.job.prompt_tokens for s in batch.subs if s.index % batch.n == 0)
    completion = sum(r.emitted for r in reqs)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }


async def _primers(server: TwinServer, batch: Batch) -> None:
    """n > 1: each prompt's prefix-caching request (max_new_tokens 0) runs first, with the
    prompt's bootstrap room, and is waited for before the samples are sent."""
    for p in batch.primers:
        req = Req(rid=p.job.rid, plan=p.plan, max_tokens=0, prompt_tokens=p.job.prompt_tokens)
        req.finish("length")  # nothing to decode; only the prefill and the transfer run
        await server.prepare(p.job, req, p.boot, p.prompt)


async def serve_batch(server: TwinServer, request: web.Request, batch: Batch) -> web.StreamResponse:
    if server.status != "up":
        return not_ready()
    started = time.monotonic()
    reqs = [
        Req(
            rid=s.job.rid,
            plan=s.plan,
            max_tokens=s.job.max_tokens,
            prompt_tokens=s.job.prompt_tokens,
            stop=s.job.stop,
        )
        for s in batch.subs
    ]
    for s, r in zip(batch.subs, reqs, strict=True):
        server.inflight[s.job.rid] = r
    tasks: list[asyncio.Task[None]] = []
    try:
        await _primers(server, batch)
        tasks = [
            asyncio.create_task(
                server.prepare(s.job, r, s.boot, s.prompt, shares_room=s.shares_room)
            )
            for s, r in zip(batch.subs, reqs, strict=True)
        ]
        if batch.stream:
            return await _stream(server, request, batch, reqs, tasks)
        await asyncio.gather(*tasks)
        for r in reqs:
            await r.done.wait()
        return web.json_response(_full(batch, reqs))
    except TransferError as exc:
        return web.json_response(error_body(str(exc), 500, "InternalServerError"), status=500)
    except asyncio.CancelledError:
        for r in reqs:
            server._abort(r, "client_disconnect")
        raise
    finally:
        for t in tasks:
            t.cancel()
        for s, r in zip(batch.subs, reqs, strict=True):
            server.inflight.pop(s.job.rid, None)
            if r.finish_reason is None:
                server._abort(r, "batch_failed")
            server.record(s.job, r, started)


def _full(batch: Batch, reqs: list[Req]) -> JSONValue:
    bodies = [
        FORMATS[batch.kind](s.job).full(r.pieces, r.finish_reason or "", r.emitted, r.matched)
        for s, r in zip(batch.subs, reqs, strict=True)
    ]
    if batch.kind == "generate":
        return bodies  # /generate answers a batch with a list
    merged = bodies[0]
    merged["choices"] = [
        {**b["choices"][0], "index": s.index} for s, b in zip(batch.subs, bodies, strict=True)
    ]
    merged["usage"] = _usage(batch, reqs)
    return merged


# A sub-request's stream events as the batch reads them, or the transfer error that ended it.
_PumpEvent = StreamEvent | tuple[Literal["error"], str]


async def _pump(
    k: int, req: Req, task: asyncio.Task[None], out: asyncio.Queue[tuple[int, _PumpEvent]]
) -> None:
    try:
        await task
    except TransferError as exc:
        await out.put((k, ("error", str(exc))))
        return
    while True:
        event = await req.stream_events.get()
        await out.put((k, event))
        if event[0] == "finish":
            return


async def _stream(
    server: TwinServer,
    request: web.Request,
    batch: Batch,
    reqs: list[Req],
    tasks: list[asyncio.Task[None]],
) -> web.StreamResponse:
    fmts = [FORMATS[batch.kind](replace(s.job, include_usage=False)) for s in batch.subs]
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    queue: asyncio.Queue[tuple[int, _PumpEvent]] = asyncio.Queue()
    pumps = [
        asyncio.create_task(_pump(k, r, t, queue))
        for k, (r, t) in enumerate(zip(reqs, tasks, strict=True))
    ]
    try:
        await resp.prepare(request)
        for s, f in zip(batch.subs, fmts, strict=True):
            for chunk in f.start():
                await resp.write(_index(chunk, s.index, batch.kind))
        open_ = len(reqs)
        while open_:
            k, event = await queue.get()
            s, f, r = batch.subs[k], fmts[k], reqs[k]
            if event[0] == "error":
                # serving_completions/chat: an abort with a status code is an error chunk, then stop
                await resp.write(sse({"error": error_body(event[1], 500, "InternalServerError")}))
                break
            if event[0] == "finish":
                open_ -= 1
                for chunk in f.end(r.finish_reason or "", r.emitted, r.matched):
                    await resp.write(_index(chunk, s.index, batch.kind))
                continue
            await resp.write(_index(f.token(event[1]), s.index, batch.kind))
        else:
            if batch.include_usage and batch.kind != "generate":
                first = batch.subs[0].job
                obj = "chat.completion.chunk" if batch.kind == "chat" else "text_completion"
                await resp.write(
                    sse(
                        {
                            "id": first.rid,
                            "object": obj,
                            "created": first.created,
                            "model": first.model,
                            "choices": [],
                            "usage": _usage(batch, reqs),
                        }
                    )
                )
        await resp.write(b"data: [DONE]\n\n")
    except (ConnectionResetError, ConnectionError):
        for r in reqs:
            server._abort(r, "client_disconnect")
    finally:
        for p in pumps:
            p.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await p
    return resp
