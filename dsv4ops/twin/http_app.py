"""The HTTP surface of a twin server: SGLang 0.5.23's paths, status codes and JSON keys, plus
the twin's own /_twin/state and /_twin/hazard."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from .batch import serve_batch
from .formats import error_body
from .limits import MODEL_CONTEXT_LEN, refusal
from .memory import decode_cuda_graph_memory_gb, memory_usage
from .parse import BadRequest, Parsers, parse, parse_batch
from .sched_view import MAX_TOTAL_TOKENS
from .server import SGLANG_VERSION, TwinServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running "
    "or waiting requests, the operation will not be performed.)\n"
)


def context_len(s: TwinServer) -> int:
    return s.args.context_length or MODEL_CONTEXT_LEN


def model_info(s: TwinServer) -> dict[str, object]:
    a = s.args
    return {
        "model_path": a.model_path,
        "served_model_name": a.served_model_name,
        "tokenizer_path": a.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": a.reasoning_parser,
        "tool_call_parser": a.tool_call_parser,
        "disaggregation_mode": a.mode,
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "deepseek_v4",
        "architectures": ["DeepseekV4ForCausalLM"],
    }


def server_info(s: TwinServer) -> dict[str, object]:
    a = s.args
    resolved = {
        "model_path": a.model_path,
        "served_model_name": a.served_model_name,
        "host": a.host,
        "port": a.port,
        "tp_size": a.tp_size,
        "dp_size": a.dp_size,
        "attn_dp_size": a.attn_dp_size,
        "ep_size": a.ep_size,
        "max_running_requests": s.max_running,
        "context_length": a.context_length,
        "page_size": a.page_size,
        "kv_cache_dtype": a.kv_cache_dtype,
        "disaggregation_mode": a.mode,
        "disaggregation_bootstrap_port": a.bootstrap_port,
        "disaggregation_transfer_backend": a.transfer_backend,
        "disable_overlap_schedule": a.disable_overlap_schedule,
        "enable_two_batch_overlap": a.enable_two_batch_overlap,
        "moe_a2a_backend": a.moe_a2a_backend,
        "enable_metrics": a.enable_metrics,
        "cuda_graph_bs_decode": list(s.buckets) or None,
        "cuda_graph_max_bs_decode": s.buckets[-1] if s.buckets else None,
        "tool_call_parser": a.tool_call_parser,
        "reasoning_parser": a.reasoning_parser,
    }
    e = s.engine
    internal = {
        **resolved,
        "world_size": a.tp_size,
        "effective_max_running_requests_per_dp": s.max_running,
        "last_gen_throughput": e.gen_throughput() if e else 0.0,
        # the same numbers as the memory gauges of /metrics (memory.py)
        "memory_usage": memory_usage(s.buckets, token_capacity=MAX_TOTAL_TOKENS),
        "disaggregation_mode": a.mode,
        "decode_cuda_graph_bs": list(s.buckets),
        "decode_cuda_graph_memory_gb": decode_cuda_graph_memory_gb(s.buckets),
    }
    return {
        **resolved,
        "launch_command": " ".join(["python", "-m", "sglang.launch_server", *a.argv]),
        "status": "ready" if s.status == "up" else s.status,
        "max_total_num_tokens": MAX_TOTAL_TOKENS,
        "max_req_input_len": context_len(s) - 1,
        "startup_time": s.startup_time,
        "kv_events": None,
        "internal_states": [internal],
        "version": SGLANG_VERSION,
        "frontend": "python",
        "twin_kernel_package": s.kernel.package,
        "twin_instance_id": s.instance_id,
        # Not in SGLang: the twin's model clock (wall s = model s x scale), so a client can
        # put what it measures on the clock the server reports in (canary/timescale.py).
        "twin_time_scale": s.config.time_scale,
    }


def twin_state(s: TwinServer) -> dict[str, object]:
    e = s.engine
    peers: list[dict[str, object]] | None = None
    if s.bootstrap is not None:
        peers = [
            {"decode_addr": p.decode_addr, "decode_instance_id": p.instance_id, "stale": p.stale}
            for p in s.bootstrap.peers.values()
        ]
    elif s.receiver is not None:
        peers = [{"bootstrap": f"{h}:{p}", **info} for (h, p), info in s.receiver.prefills.items()]
    return {
        "role": s.role,
        "instance_id": s.instance_id,
        "pid": s.pid,
        "status": s.status,
        "started_at": s.started_at,
        "hazards": s.hazards.as_dict(),
        "corrupt_shapes": list(s.hazards.corrupt_shapes),
        "stream_tools_shapes": list(s.hazards.stream_shapes),
        "wedged": bool(e and e.wedged),
        "running": len(e.running) if e else 0,
        "queued": len(e.waiting) if e else 0,
        "steps": e.steps_done if e else 0,
        # the rids of the requests this process is serving now (what /abort_request matches)
        "inflight_rids": sorted(s.inflight),
        "peers": peers,
        "degraded_peers": [p["decode_instance_id"] for p in peers or [] if p.get("stale")]
        if s.bootstrap
        else None,
        "overlap_schedule": s.args.overlap_schedule,
        "multi_stream_overlap": s.multi_stream_overlap,
        "decode_cuda_graph_bs": s.buckets,
        "twin_kernel_package": s.kernel.package,
        "moe_config_dir": s.kernel.config_dir,
        "time_scale": s.config.time_scale,
        "ignored_args": list(s.args.ignored),
    }


def too_long(kind: str, why: str, stream: bool) -> web.Response:
    """A request over the context length, answered as 0.5.23 answers it (twin/limits.py): 400
    from the OpenAI endpoints; from /generate a 400 unless streamed, where the refusal is an
    SSE error event in a 200 (http_server.py serve_generate_request)."""
    if kind != "generate":
        return web.json_response(error_body(why, 400), status=400)
    if not stream:
        return web.json_response({"error": {"message": why}}, status=400)
    event = {
        "error": {"message": why, "type": "invalid_request_error", "code": 400, "retryable": False}
    }
    return web.Response(
        body=b"data: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n",
        content_type="text/event-stream",
    )


class _Handlers:
    """One handler per SGLang path, over one TwinServer (aiohttp takes the bound methods)."""

    def __init__(self, s: TwinServer) -> None:
        self.s = s
        self.parsers = Parsers(
            tool_call_parser=s.args.tool_call_parser,
            reasoning_parser=s.args.reasoning_parser,
            reasoning_tokens=s.config.reasoning_tokens,
        )
        # Twin-only, for tests of what a router forwards: the X-Request-ID header of the last
        # generation request per path (None: it came without one). SGLang 0.5.23 reads no such
        # header (its request id is the body's `rid`), so the twin does not act on it either.
        self.request_id_headers: dict[str, str | None] = {}

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if await self.s.health() else 503)

    async def ready(self, request: web.Request) -> web.Response:
        # TokenizerManager.is_ready(): up and not shutting down
        s = self.s
        return web.Response(status=200 if s.status == "up" and not s.gracefully_exit else 503)

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response(model_info(self.s))

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(server_info(self.s))

    def _card(self) -> dict[str, object]:
        name = self.s.args.served_model_name
        return {
            "id": name,
            "object": "model",
            "created": int(self.s.started_at),
            "owned_by": "sglang",
            "root": name,
            "parent": None,
            "max_model_len": context_len(self.s),
        }

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [self._card()]})

    async def one_model(self, request: web.Request) -> web.Response:
        if request.match_info["model"] != self.s.args.served_model_name:
            body = error_body(
                f"The model `{request.match_info['model']}` does not exist.", 404, "NotFoundError"
            )
            body["code"] = "model_not_found"
            return web.json_response({"error": body}, status=404)
        return web.json_response(self._card())

    def generation(self, kind: str) -> Handler:
        s, parsers = self.s, self.parsers

        async def handler(request: web.Request) -> web.StreamResponse:
            self.request_id_headers[request.path] = request.headers.get("X-Request-ID")
            try:
                body = await request.json()
                batch = parse_batch(kind, body, s.args.served_model_name, parsers)
                if batch is not None:  # a list of prompts or n > 1
                    for sub in batch.subs:
                        if why := refusal(sub.job, context_len(s)):
                            return too_long(kind, why, sub.job.stream)
                    return await serve_batch(s, request, batch)
                job, plan, boot, prompt = parse(kind, body, s.args.served_model_name, parsers)
            except (BadRequest, json.JSONDecodeError) as exc:
                if kind == "generate":
                    return web.json_response({"error": {"message": str(exc)}}, status=400)
                return web.json_response(error_body(str(exc), 400, "Bad Request"), status=400)
            if why := refusal(job, context_len(s)):
                return too_long(kind, why, job.stream)
            return await s.handle_generation(request, job, plan, boot, prompt)

        return handler

    async def abort_request(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "invalid JSON"}}, status=400)
        if not isinstance(body, dict):
            return web.json_response(
                {"error": {"message": "AbortReq must be a JSON object"}}, status=400
            )
        # SGLang's AbortReq: one request by rid (an unknown rid is a no-op), or all of them
        self.s.abort(body.get("rid"), bool(body.get("abort_all", False)))
        return web.Response(status=200)

    async def flush_cache(self, request: web.Request) -> web.Response:
        e = self.s.engine
        if e is not None and (e.running or e.waiting):
            return web.Response(
                status=400,
                text="Cache not flushed. Please check backend logs "
                "for more details. (When there are running or waiting requests, "
                "the operation will not be performed.)\n",
            )
        return web.Response(text=FLUSHED)

    async def metrics(self, request: web.Request) -> web.Response:
        assert self.s.metrics is not None
        return web.Response(
            body=self.s.metrics.render(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def loads(self, request: web.Request) -> web.Response:
        s, e = self.s, self.s.engine
        return web.json_response(
            {
                "timestamp": time.time(),
                "version": SGLANG_VERSION,
                "accelerator": "twin",
                "num_accelerators": s.args.tp_size,
                "loads": [
                    {
                        "dp_rank": 0,
                        "num_running_reqs": len(e.running) if e else 0,
                        "num_waiting_reqs": len(e.waiting) if e else 0,
                    }
                ],
            }
        )

    async def state(self, request: web.Request) -> web.Response:
        return web.json_response(
            {**twin_state(self.s), "x_request_id_by_path": dict(self.request_id_headers)}
        )

    async def hazard(self, request: web.Request) -> web.Response:
        s = self.s
        before = s.hazards.corrupt_shapes, s.hazards.stream_shapes
        try:
            body = await request.json()
            if "shapes" in body:  # the corrupt or stream_tools hazard's (twin/corruption.py)
                s.hazards.set_shapes(str(body.get("hazard")), body["shapes"])
            s.set_hazard(str(body.get("hazard")), str(body.get("state")))
        except (ValueError, AttributeError, TypeError) as exc:
            # a rejected request changes nothing
            s.hazards.corrupt_shapes, s.hazards.stream_shapes = before
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(
            {
                "hazards": s.hazards.as_dict(),
                "corrupt_shapes": list(s.hazards.corrupt_shapes),
                "stream_tools_shapes": list(s.hazards.stream_shapes),
            }
        )

    @web.middleware
    async def count_http(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.s.metrics is not None:
            self.s.metrics.http_requests.labels(endpoint=request.path, method=request.method).inc()
        return await handler(request)


def build_app(s: TwinServer) -> web.Application:
    h = _Handlers(s)
    app = web.Application(middlewares=[h.count_http], client_max_size=64 * 1024 * 1024)
    r = app.router
    for path in ("/health", "/health_generate"):
        r.add_get(path, h.health)
    r.add_get("/ready", h.ready)
    r.add_get("/model_info", h.model_info)
    r.add_get("/get_model_info", h.model_info)
    r.add_get("/server_info", h.server_info)
    r.add_get("/get_server_info", h.server_info)
    r.add_get("/v1/models", h.models)
    r.add_get("/v1/models/{model}", h.one_model)
    r.add_post("/v1/chat/completions", h.generation("chat"))
    r.add_post("/v1/completions", h.generation("completion"))
    r.add_post("/generate", h.generation("generate"))
    r.add_put("/generate", h.generation("generate"))
    r.add_post("/abort_request", h.abort_request)
    r.add_get("/flush_cache", h.flush_cache)
    r.add_post("/flush_cache", h.flush_cache)
    r.add_get("/v1/loads", h.loads)
    if s.metrics is not None:
        r.add_get("/metrics", h.metrics)
    r.add_get("/_twin/state", h.state)
    r.add_post("/_twin/hazard", h.hazard)
    return app
