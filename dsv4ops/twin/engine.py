"""The decode batch loop: every running request gets one token per modelled step.

Steps are scheduled against absolute deadlines (next_step_at += step) so the modelled step time
does not drift with the CPU cost of emitting tokens. The loop is also rank 0's scheduler loop for
the metrics: it reports each iteration to its `StatsReporter`, and when it finds no batch it runs
the idle path (`_maybe_log_idle_metrics`). It carries two hazards: the overlap-scheduler wedge
(an abort cascade desyncs the TP ranks) and the multi-stream-overlap race (a request that joins a
large captured batch may get corrupted output).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Literal

from .calls import Piece
from .config import TwinConfig
from .content import Plan
from .corruption import corrupt_plan, stream_fault
from .events import EventLog
from .formats import EOS_TOKEN_ID
from .hazards import HazardBoard
from .perf import StepVariation, deploy_offset, padded_batch, step_ms
from .reporter import StatsReporter

# How far behind its deadlines the loop may fall before it gives up catching up: a host stall
# (the twin shares two cores with its client, router and prefill) is caught up, so a step keeps
# its modelled length; a SIGSTOP or a wedge is not. At 0.25 s a stall of B's decode in an A/B
# block cost it up to 5% of a level's throughput (the step-4 A/B read B worse at 60 on CI).
CATCH_UP_LIMIT_S = 1.0
# The real idle loop spins; the twin's wakes this often (wall seconds) to run the idle path, so an
# idle republish follows a transfer that ended without a request joining the batch.
IDLE_POLL_S = 0.25


# What a request's stream carries: each piece as it is sent, then its finish reason, once.
StreamEvent = tuple[Literal["token"], Piece] | tuple[Literal["finish"], str]


@dataclass(eq=False)
class Req:
    rid: str
    plan: Plan
    max_tokens: int
    prompt_tokens: int
    stream_events: asyncio.Queue[StreamEvent] = field(default_factory=asyncio.Queue)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    n_tokens: int = 0
    emitted: int = 0
    finish_reason: str | None = None
    aborted: bool = False
    corrupted: str | None = None
    # what the stream_tools hazard does to this request's streamed calls (a whole response is
    # never touched): a twin/corruption.py STREAM_SHAPES name
    stream_fault: str | None = None
    joined: bool = False
    is_health_probe: bool = False
    first_token_at: float | None = None
    # `stop` strings: the output ends at the first one decoded, cut before it (the detokenizer's
    # trim_matched_stop); while the text ends in a prefix of one, nothing is streamed
    # (output_streamer.py L472-473), so the held tokens go out together in one chunk.
    stop: tuple[str, ...] = ()
    # what ended it (finish_reason.matched): the stop string, or the EOS token's id on a natural
    # end (FINISH_MATCHED_TOKEN, schedule_batch.py L284-293); None when cut by max_tokens
    matched: str | int | None = None
    sent: list[Piece] = field(default_factory=list)  # the output as streamed
    _text: str = ""
    _sent_len: int = 0

    def build_pieces(self) -> None:
        """Fix the output length; pieces are produced one by one as steps run."""
        plan = self.plan
        full = plan.token_count()
        self.n_tokens = min(full, max(self.max_tokens, 0))
        natural = plan.natural_stop and full <= self.max_tokens
        self._natural = plan.finish_reason() if natural else "length"

    def piece(self, i: int) -> Piece:
        return self.plan.piece(i)

    @property
    def pieces(self) -> list[Piece]:
        """The output so far, as streamed (stop strings cut, held tokens joined)."""
        return list(self.sent)

    def _send(self, piece: Piece) -> None:
        self.sent.append(piece)
        self.stream_events.put_nowait(("token", piece))

    def _release(self) -> None:
        if len(self._text) > self._sent_len:
            self._send(("text", self._text[self._sent_len :]))
            self._sent_len = len(self._text)

    def _match_stop(self, text: str) -> None:
        """schedule_batch.py `_check_str_based_finish` (L1911-1930) for one new token."""
        self._text += text
        for stop in self.stop:
            pos = self._text.find(stop) if stop else -1
            if pos >= 0:
                self._text = self._text[: max(pos, self._sent_len)]
                self._release()
                self.matched = stop
                self.finish("stop")
                return
        if not any(_ends_in_prefix(self._text, stop) for stop in self.stop):
            self._release()

    def emit_next(self) -> None:
        piece = self.piece(self.emitted)
        if self.emitted == 0:
            self.first_token_at = time.monotonic()
        self.emitted += 1
        if self.stop and piece[0] == "text":
            self._match_stop(piece[1])
        else:
            self._send(piece)
        if self.finish_reason is None and self.emitted >= self.n_tokens:
            self._release()  # a finished request sends everything it holds
            if self._natural != "length":
                self.matched = EOS_TOKEN_ID
            self.finish(self._natural)

    def finish(self, reason: str) -> None:
        if self.finish_reason is None:
            self.finish_reason = reason
            self.stream_events.put_nowait(("finish", reason))
            self.done.set()


def _ends_in_prefix(text: str, stop: str) -> bool:
    """`check_match_stop_str_prefix` (schedule_batch.py L1830-1853): the text ends in a proper
    prefix of `stop`, so the next token may complete it."""
    return any(text.endswith(stop[:i]) for i in range(1, len(stop)))


class DecodeEngine:
    def __init__(
        self,
        *,
        config: TwinConfig,
        buckets: list[int],
        overlap: bool,
        multi_stream_overlap: bool,
        max_running: int,
        hazards: HazardBoard,
        events: EventLog,
        reporter: StatsReporter | None = None,
    ) -> None:
        self.config = config
        self.buckets = buckets
        self.overlap = overlap
        self.multi_stream_overlap = multi_stream_overlap
        self.max_running = max_running
        self.hazards = hazards
        self.events = events
        self.reporter = reporter
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.wedged = False
        self.steps_done = 0
        # time.monotonic() of the last step that produced a token (SGLang's tokenizer manager
        # hears of every one: the server's /health counts it as a sign of life)
        self.last_output_at = 0.0
        self._wake = asyncio.Event()
        self._abort_times: deque[float] = deque()
        self._rng = random.Random(config.seed)
        seed = config.seed if config.deploy_seed is None else config.deploy_seed
        offset, start = deploy_offset(config.deploy_variation_pct, seed, config.deploy_counter)
        self.variation = StepVariation(
            noise_pct=config.step_noise_pct,
            drift_pct_per_min=config.step_drift_pct_per_min,
            epoch=config.drift_epoch,
            time_scale=config.time_scale,
            seed=config.seed,
            offset=offset,
        )
        if config.deploy_variation_pct:
            events.emit("deploy_offset", factor=round(offset, 6), start=start)

    # --- requests ------------------------------------------------------------------------
    def submit(self, req: Req) -> None:
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Req, reason: str) -> bool:
        """Abort one in-flight request; returns False if it had already finished."""
        if req.finish_reason is not None:
            return False
        req.aborted = True
        self._unqueue(req)
        req.finish("abort")
        self._count_abort(req, reason)
        return True

    def discard(self, req: Req) -> None:
        """Drop a request without counting it as an abort (a timed-out health probe)."""
        self._unqueue(req)
        req.finish("abort")

    def _unqueue(self, req: Req) -> None:
        """Take an aborted request off the waiting queue, as the scheduler's next input round
        does (0.5.23: the AbortReq reaches it over ZMQ). A wedged scheduler whose rank 0 is
        blocked never runs that round again: the request stays queued, as on the box, while its
        HTTP side ends."""
        if self.wedged and self.config.wedge_rank0 != "idle":
            return
        if req in self.waiting:
            self.waiting.remove(req)

    def _count_abort(self, req: Req, reason: str) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        window = self.config.wall(self.config.wedge_window_s)
        self._abort_times.append(now)
        while self._abort_times and now - self._abort_times[0] > window:
            self._abort_times.popleft()
        if len(self._abort_times) < max(self.config.wedge_aborts, 1):
            return
        count = len(self._abort_times)
        self._abort_times.clear()
        will_wedge = self.hazards.active("wedge", self.overlap) and not self.wedged
        self.events.emit(
            "abort_cascade",
            aborts=count,
            reason=reason,
            overlap_schedule=self.overlap,
            wedges=will_wedge,
        )
        if will_wedge:
            self.wedge("abort_cascade", last=req)

    def wedge(self, cause: str, last: Req | None = None) -> None:
        """TP desync: ranks disagree on the batch; nothing runs again until a restart."""
        if self.wedged:
            return
        self.wedged = True
        if not self.running and last is not None:
            self.running.append(last)  # the ranks still hold the aborted batch
        self.events.emit("wedged", cause=cause, running=len(self.running), queued=len(self.waiting))
        self._wake.set()

    # --- stats ---------------------------------------------------------------------------
    def gen_throughput(self) -> float:
        """SGLang's last_gen_throughput: what rank 0 last logged (frozen while the loop is blocked)."""
        return self.reporter.last_gen_throughput if self.reporter else 0.0

    # --- the loop ------------------------------------------------------------------------
    def _admit(self) -> None:
        joined = []
        while self.waiting and len(self.running) < self.max_running:
            req = self.waiting.popleft()
            req.build_pieces()
            if req.n_tokens == 0:
                req.finish("length")
                continue
            req.joined = True
            self.running.append(req)
            joined.append(req)
        if joined:
            self._maybe_corrupt(joined)
            self._maybe_break_streams(joined)

    def _maybe_break_streams(self, joined: list[Req]) -> None:
        """The stream_tools hazard: a streaming tool-call parser that is clean at concurrency 1
        and breaks calls at `stream_tools_min_bs` running and above (vllm#48089 saw 16). Its
        condition, a parser build with the bug, never holds on the 0.5.23 this twin models:
        `force` puts that build in; the load rule holds in both."""
        batch = len(self.running)
        if batch < self.config.stream_tools_min_bs or not self.hazards.active(
            "stream_tools", False
        ):
            return
        for req in joined:
            if req.is_health_probe or self._rng.random() >= self.config.stream_tools_prob:
                continue
            shape = stream_fault(req.plan, self._rng.randrange(1 << 30), self.hazards.stream_shapes)
            if shape is not None:
                req.stream_fault = shape
                self.events.emit("stream_tools_broken", rid=req.rid, shape=shape, batch=batch)

    def _maybe_corrupt(self, joined: list[Req]) -> None:
        batch = len(self.running)
        captured = bool(self.buckets) and batch <= self.buckets[-1]
        padded = padded_batch(batch, self.buckets)
        condition = self.multi_stream_overlap and captured and padded >= self.config.corrupt_min_bs
        if not self.hazards.active("corrupt", condition):
            return
        for req in joined:
            if req.is_health_probe or self._rng.random() >= self.config.corrupt_prob:
                continue
            # Donors keep their own (uncorrupted) values, so a swap is always visible.
            others = [
                r
                for r in self.running
                if r is not req
                and r.plan.key != req.plan.key
                and not r.is_health_probe
                and r.corrupted is None
            ]
            same_kind = [
                r for r in others if (r.plan.tool_call is None) == (req.plan.tool_call is None)
            ]
            donor = self._rng.choice(same_kind).plan if same_kind else None
            shape = corrupt_plan(
                req.plan, donor, self._rng.randrange(1 << 30), self.hazards.corrupt_shapes
            )
            if shape is None:
                continue
            req.corrupted = shape
            req.build_pieces()
            self.events.emit(
                "corrupted", rid=req.rid, kind=shape, shape=shape, batch=batch, padded_bs=padded
            )

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_at: float | None = None
        while True:
            if self.wedged:
                await self._wedged_loop()  # returns never: only a restart clears a wedge
            self._admit()
            if not self.running:
                next_at = None
                await self._idle()
                continue
            batch = len(self.running)
            model_s = (
                step_ms(
                    batch,
                    self.buckets,
                    a=self.config.step_a_ms,
                    b=self.config.step_b_ms,
                    hidden_ms=self.config.overlap_hidden_ms if self.overlap else 0.0,
                    eager_factor=self.config.eager_factor,
                )
                / 1000.0
            )
            if self.variation.active:
                model_s *= self.variation.factor()
            now = loop.time()
            if next_at is None or now - next_at > CATCH_UP_LIMIT_S:
                next_at = now  # idle, or hopelessly behind: restart the deadline chain
            next_at += self.config.wall(model_s)
            # Always yield, even when behind, so HTTP handlers keep running while catching up.
            await asyncio.sleep(max(next_at - loop.time(), 0.0))
            if not self.wedged:
                self._step()

    def _step(self) -> None:
        """One decode iteration: every running request emits its next token."""
        ran = len(self.running)
        produced = 0
        still = []
        for req in self.running:
            if req.finish_reason is not None:
                continue
            req.emit_next()
            produced += 1
            if req.finish_reason is None:
                still.append(req)
        self.running = still
        self.steps_done += 1
        if produced:
            self.last_output_at = time.monotonic()
        if self.reporter is not None:
            # the batch the iteration ran (finished requests included), as process_batch_result
            self.reporter.decode_step(
                produced, batch_size=ran, cuda_graph=any(b >= ran for b in self.buckets)
            )

    async def _idle(self) -> None:
        """No batch: the idle path (metrics republish), then sleep until a request or a poll."""
        if self.reporter is not None:
            self.reporter.on_idle()
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), IDLE_POLL_S)

    async def _wedged_loop(self) -> None:
        """The TP desync. Rank 0 blocked (default): its loop never runs again, so it logs
        nothing and its gauges keep their last values. Rank 0 idle (DSV4_TWIN_WEDGE_RANK0=idle):
        it dropped the batch the other ranks still hold and runs its idle path with an empty
        batch; it never schedules again (its next collective would block it too)."""
        if self.config.wedge_rank0 != "idle" or self.reporter is None:
            await asyncio.Event().wait()  # never set
        assert self.reporter is not None
        while True:
            view = replace(self.reporter.live(), running=0, queued=len(self.waiting))
            self.reporter.on_idle(rank0_view=view)
            await asyncio.sleep(IDLE_POLL_S)
