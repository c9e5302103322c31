"""One twin server process: the state of a prefill, decode or unified SGLang worker. This module
holds the request path (prefill compute, KV transfer, decode batch, streaming) and the information
SGLang reports; `http_app.py` maps URLs onto it."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from aiohttp import web

from .args import ServerArgs
from .config import TwinConfig
from .content import Plan
from .engine import DecodeEngine, Req
from .events import EventLog
from .formats import FORMATS, Job, error_body
from .hazards import HazardBoard
from .health import health_generate
from .kernel_package import KernelConfigChoice
from .kv_receiver import KVReceiver
from .metrics import TwinMetrics
from .parse import Bootstrap, prompt_hash
from .pd import FAKE_BOOTSTRAP_HOST, BootstrapServer, Room, TransferError
from .perf import DSV4_DEFAULT_MAX_RUNNING, resolve_decode_buckets
from .reporter import StatsReporter
from .sched_view import fully_idle, live_stats, snapshot

SGLANG_VERSION = "0.5.23"


def _env_on(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def not_ready() -> web.Response:
    return web.json_response(
        error_body("The server is not ready", 503, "ServiceUnavailable"), status=503
    )


class TwinServer:
    def __init__(
        self, args: ServerArgs, config: TwinConfig, env: dict[str, str], kernel: KernelConfigChoice
    ) -> None:
        self.args = args
        self.config = config
        self.env = env
        self.kernel = kernel
        self.role = args.mode if args.mode != "null" else "unified"
        self.instance_id = uuid.uuid4().hex[:16]
        self.pid = os.getpid()
        self.started_at = time.time()
        self.status = "starting"
        # TokenizerManager.gracefully_exit (SIGTERM seen) and ServerStatus.UnHealthy (the last
        # /health timed out): /health answers 503 for the first; SIGTERM exits at once on the second
        self.gracefully_exit = False
        self.unhealthy = False
        self.startup_time: float | None = None
        self.events = EventLog(
            config.event_log, role=self.role, port=args.port, instance_id=self.instance_id
        )
        self.hazards = HazardBoard(config)
        self.multi_stream_overlap = _env_on(env.get("SGLANG_OPT_USE_MULTI_STREAM_OVERLAP"), True)
        self.health_generation = _env_on(env.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"), True)
        self.max_running = args.max_running_requests or DSV4_DEFAULT_MAX_RUNNING
        # A prefill server disables the decode graph (cuda_graph_hook.py:557-576).
        self.buckets = resolve_decode_buckets(
            explicit=args.cuda_graph_bs_decode,
            max_bs=args.cuda_graph_max_bs_decode,
            max_running_requests=args.max_running_requests,
            tp_size=args.tp_size,
            disable_padding=args.disable_cuda_graph_padding,
            disabled=args.disable_decode_cuda_graph or self.role == "prefill",
        )
        self.inflight: dict[str, Req] = {}
        self.prefill_lock = asyncio.Lock()
        # prefill requests waiting for the prefill (their room, None for a fake bootstrap)
        self._prefill_waiting: dict[int, Room | None] = {}
        self._prefill_seq = 0
        self._prefill_running: list[Room | None] = []  # in prefill compute now
        self._prefill_output_at = 0.0  # a prefill request last finished (last_output_at)
        self._build_parts(args, config)

    def _build_parts(self, args: ServerArgs, config: TwinConfig) -> None:
        """The role's working parts: the metrics reporter, the decode engine (not on a prefill),
        the bootstrap server (prefill) or KV receiver (decode), and /metrics when enabled."""
        # rank 0's metrics reporter: what /metrics shows is what it last published
        self.reporter = StatsReporter(
            config,
            decode_log_interval=args.decode_log_interval,
            live=lambda: live_stats(self),
            fully_idle=lambda: fully_idle(self),
        )
        self.engine: DecodeEngine | None = None
        if self.role != "prefill":
            self.engine = DecodeEngine(
                config=config,
                buckets=self.buckets,
                overlap=args.overlap_schedule,
                multi_stream_overlap=self.multi_stream_overlap,
                max_running=self.max_running,
                hazards=self.hazards,
                events=self.events,
                reporter=self.reporter,
            )
        info = {
            "pid": self.pid,
            "page_size": args.page_size,
            "kv_cache_dtype": args.kv_cache_dtype,
            "tp_size": args.tp_size,
        }
        self.bootstrap = (
            BootstrapServer(
                config=config,
                hazards=self.hazards,
                events=self.events,
                instance_id=self.instance_id,
                info=info,
            )
            if self.role == "prefill"
            else None
        )
        self.receiver = (
            KVReceiver(
                config=config,
                hazards=self.hazards,
                events=self.events,
                instance_id=self.instance_id,
                decode_addr=f"{args.host}:{args.port}",
            )
            if self.role == "decode"
            else None
        )
        self.metrics = (
            TwinMetrics(
                model_name=args.served_model_name,
                engine_type=self.role,
                snapshot=lambda: snapshot(self),
            )
            if args.enable_metrics
            else None
        )

    # --- lifecycle -----------------------------------------------------------------------
    def capture_seconds(self) -> float:
        return self.config.capture_s_per_bucket * len(self.buckets)

    def ranks_registered(self) -> None:
        """The prefill's scheduler ranks registered with the bootstrap server (after load and
        capture, before the HTTP port opens): `/route` answers from now on."""
        if self.bootstrap is not None:
            self.bootstrap.ready = True
        if self.receiver is not None:
            self.receiver.start_heartbeat()  # the decode KV manager's heartbeat thread

    def mark_ready(self) -> None:
        self.status = "up"
        self.startup_time = time.time() - self.started_at
        self.reporter.start()
        if self.metrics is not None:
            self.metrics.startup.labels(**self.metrics.labels(), phase="total").set(
                self.startup_time / self.config.time_scale
            )
        self.events.emit("ready", startup_time=self.startup_time, buckets=self.buckets)
        if self.engine is not None and self.hazards.state("wedge") == "force":
            self.engine.wedge("forced")

    def set_hazard(self, name: str, state: str) -> None:
        """Raises ValueError on unknown names/states."""
        self.hazards.set(name, state)
        self.events.emit("hazard_set", hazard=name, state=state)
        if name == "wedge" and state == "force" and self.engine is not None and self.status == "up":
            self.engine.wedge("forced")

    # --- generation ----------------------------------------------------------------------
    async def prefill_compute(self, prompt_tokens: int, room: Room | None = None) -> None:
        """One prompt at a time; each is a prefill batch, which publishes the gauges."""
        self._prefill_seq += 1
        key = self._prefill_seq
        self._prefill_waiting[key] = room
        try:
            async with self.prefill_lock:
                del self._prefill_waiting[key]
                self._prefill_running.append(room)
                try:
                    self.reporter.prefill_batch(prompt_tokens)
                    await asyncio.sleep(
                        self.config.wall(prompt_tokens * self.config.prefill_ms_per_token / 1000.0)
                    )
                finally:
                    self._prefill_running.remove(room)
        finally:
            self._prefill_waiting.pop(key, None)

    async def handle_generation(
        self, request: web.Request, job: Job, plan: Plan, boot: Bootstrap, prompt: str
    ) -> web.StreamResponse:
        if self.status != "up":
            return not_ready()
        started = time.monotonic()
        req = Req(
            rid=job.rid,
            plan=plan,
            max_tokens=job.max_tokens,
            prompt_tokens=job.prompt_tokens,
            stop=job.stop,
        )
        self.inflight[job.rid] = req
        try:
            await self.prepare(job, req, boot, prompt)
            return await self._respond(request, job, req)
        except TransferError as exc:
            return web.json_response(error_body(str(exc), 500, "InternalServerError"), status=500)
        except asyncio.CancelledError:
            self._abort(req, "client_disconnect")
            raise
        finally:
            self.inflight.pop(job.rid, None)
            self.record(job, req, started)

    async def prepare(
        self, job: Job, req: Req, boot: Bootstrap, prompt: str, *, shares_room: bool = False
    ) -> None:
        """Everything before the first token: prefill compute and KV transfer, then the decode
        batch. Raises TransferError; HTTPBadRequest for a decode request without bootstrap."""
        real = boot.host not in (None, FAKE_BOOTSTRAP_HOST) and boot.room is not None
        if self.role == "prefill":
            await self._prefill_one(job, req, boot, prompt, real, shares_room)
            return
        if self.role == "decode" and boot.host != FAKE_BOOTSTRAP_HOST:
            if boot.host is None or boot.room is None:
                raise web.HTTPBadRequest(
                    text='{"error":{"message":"bootstrap_host and bootstrap_room are '
                    'required in decode mode"}}',
                    content_type="application/json",
                )
            assert self.receiver is not None
            port = boot.port if boot.port is not None else self.args.bootstrap_port
            if self.engine is not None and self.engine.wedged:
                await self._never_handshaken()
            if shares_room:
                await self._lost_sample(
                    boot.room, self.config.waiting_timeout_s, "decode", "KVPoll.WaitingForInput"
                )
            await self.receiver.fetch(boot.host, port, boot.room, prompt_hash(prompt))
        elif self.role == "unified":
            await self.prefill_compute(job.prompt_tokens)
        if req.finish_reason is None:
            assert self.engine is not None
            self.engine.submit(req)

    async def _never_handshaken(self) -> None:
        """A request reaching a wedged decode. 0.5.23's decode builds the KV receiver (the
        handshake with the prefill), pre-allocates and polls transfers in its scheduler loop
        (decode.py DecodePreallocQueue/DecodeTransferQueue, run by the disagg decode event
        loop); a blocked loop (rank 0 idle or not: its next TP collective blocks it) never asks
        the prefill for the room. The prefill times the room out as a bootstrap failure
        (prefill.py L1377); this side keeps the request, with no timeout of its own, forever."""
        await asyncio.Event().wait()

    async def _lost_sample(self, room: int, timeout_s: float, side: str, poll: str) -> None:
        """A parallel sample reusing its prompt's bootstrap room (0.5.23): the room's transfer
        already concluded for the prefix-caching request, so this one waits in `poll` until the
        timeout and fails (sglang PRs #26486, #30723 describe the hang)."""
        await asyncio.sleep(self.config.wall(timeout_s))
        if side == "decode" and self.receiver is not None:
            self.receiver.failed += 1
        elif self.bootstrap is not None:
            self.bootstrap.bootstrap_failed += 1
        reason = f"Request {room} timed out after {timeout_s:.1f}s in {poll}"
        self.events.emit(
            "transfer_failed",
            room=room,
            side=side,
            reason=reason,
            cause="parallel samples share the bootstrap room",
        )
        raise TransferError(reason)

    async def _prefill_one(
        self, job: Job, req: Req, boot: Bootstrap, prompt: str, real: bool, shares_room: bool
    ) -> None:
        assert self.bootstrap is not None
        if real and shares_room:
            await self.prefill_compute(job.prompt_tokens)
            await self._lost_sample(
                int(boot.room or 0),
                self.config.bootstrap_timeout_s,
                "prefill",
                "KVPoll.Bootstrapping",
            )
        room = (
            self.bootstrap.open_room(int(boot.room or 0), prompt_hash(prompt), job.prompt_tokens)
            if real
            else None
        )
        await self.prefill_compute(job.prompt_tokens, room)
        if room is not None:
            room.kv_ready.set()
            if not await self.bootstrap.wait_transferred(room):
                raise TransferError(f"KV transfer for bootstrap room {boot.room} failed")
        # The prefill answers with its first token; the router forwards the decode's answer.
        req.max_tokens = min(1, job.max_tokens)
        req.build_pieces()
        if req.n_tokens:
            req.emit_next()
        req.finish(req.finish_reason or "length")
        self._prefill_output_at = time.monotonic()

    async def _respond(self, request: web.Request, job: Job, req: Req) -> web.StreamResponse:
        fmt = FORMATS[job.kind](job)
        if not job.stream:
            await req.done.wait()
            return web.json_response(
                fmt.full(req.pieces, req.finish_reason or "", req.emitted, req.matched)
            )
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await resp.prepare(request)
            for chunk in fmt.start():
                await resp.write(chunk)
            while True:
                event = await req.stream_events.get()
                if event[0] == "finish":
                    break
                fmt.stream_fault = req.stream_fault  # decided when it joined the batch
                await resp.write(fmt.token(event[1]))
            for chunk in fmt.end(req.finish_reason or "", req.emitted, req.matched):
                await resp.write(chunk)
            await resp.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, ConnectionError):
            self._abort(req, "client_disconnect")
        return resp

    def _abort(self, req: Req, reason: str) -> bool:
        if self.engine is not None:
            return self.engine.abort(req, reason)
        if req.finish_reason is None:
            req.aborted = True
            req.finish("abort")
            return True
        return False

    def abort(self, rid: str | None, abort_all: bool) -> int:
        targets = (
            list(self.inflight.values())
            if abort_all
            else [r for r in [self.inflight.get(rid or "")] if r is not None]
        )
        return sum(self._abort(r, "abort_request") for r in targets)

    def record(self, job: Job, req: Req, started: float) -> None:
        if self.metrics is None or req.is_health_probe:
            return
        scale = self.config.time_scale
        ttft = (req.first_token_at - started) / scale if req.first_token_at else None
        self.metrics.record_request(
            streaming=job.stream,
            prompt_tokens=job.prompt_tokens,
            completion_tokens=req.emitted,
            ttft_s=ttft,
            e2e_s=(time.monotonic() - started) / scale,
            aborted=req.aborted,
        )

    # --- health --------------------------------------------------------------------------
    async def health(self) -> bool:
        """SGLang's /health (health.py)."""
        return await health_generate(self)

    def last_output_at(self) -> float:
        """When this server last produced output for any request (time.monotonic(); 0 never):
        SGLang's TokenizerManager.last_receive_tstamp, bumped by every batch of outputs the
        scheduler sends (a decode step's tokens, a prefill's finished requests)."""
        engine = self.engine.last_output_at if self.engine is not None else 0.0
        return max(engine, self._prefill_output_at)
