from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dsv4ops.canary import watchdog as W
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.watchdog import Watchdog
from dsv4ops.metrics.prom import ServerGauges

S = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.t = 100 * S

    def __call__(self) -> int:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += int(seconds * S)


def _wd(clock: Clock, **kw: float) -> Watchdog:
    return Watchdog(
        clock_ns=clock,
        first_token_deadline_s=kw.get("ftd", 10.0),
        stall_s=kw.get("stall", 2.0),
        freeze_s=kw.get("freeze", 2.0),
    )


def _stream(wd: Watchdog, clock: Clock, rid: str, *, first: bool = True) -> RequestRecord:
    rec = RequestRecord(rid=rid, t_send=clock())
    if first:
        rec.t_first = rec.t_last = clock()
    wd.register(rec, None)
    return rec


def _run_ticks(
    wd: Watchdog, clock: Clock, seconds: float, progress: Sequence[RequestRecord] = ()
) -> None:
    """Tick every 0.1 s; streams in `progress` keep receiving bytes."""
    for _ in range(int(seconds / 0.1)):
        clock.advance(0.1)
        for rec in progress:
            rec.t_last = clock()
        wd.check()


def test_mid_stream_stall_detected_within_3s_and_only_that_stream() -> None:
    clock = Clock()
    wd = _wd(clock)
    stuck, fine = _stream(wd, clock, "stuck"), _stream(wd, clock, "fine")
    _run_ticks(wd, clock, 5.0, progress=[fine])
    assert [(e.kind, e.rid) for e in wd.events] == [(W.STALL, "stuck")]
    assert 2.0 <= wd.events[0].detection_latency_s < 3.0
    assert stuck.extra["hang"] == W.STALL


def test_no_first_token_deadline() -> None:
    clock = Clock()
    wd = _wd(clock, ftd=3.0, freeze=100.0)
    _stream(wd, clock, "queued", first=False)
    _run_ticks(wd, clock, 2.5)
    assert wd.events == []
    _run_ticks(wd, clock, 1.0)
    # nothing was ever produced, so the server-wide rule fires at the same deadline
    assert [e.kind for e in wd.events] == [W.NO_FIRST_TOKEN, W.FREEZE]
    assert wd.events[0].rid == "queued" and 3.0 <= wd.events[0].detection_latency_s < 3.2


def test_server_wide_freeze_once_per_episode_and_sets_the_event() -> None:
    clock = Clock()
    wd = _wd(clock, stall=100.0)
    streams = [_stream(wd, clock, f"r{i}") for i in range(4)]
    _run_ticks(wd, clock, 1.0, progress=streams)
    assert not wd.frozen.is_set()
    _run_ticks(wd, clock, 4.0)  # every stream silent
    freezes = [e for e in wd.events if e.kind == W.FREEZE]
    assert len(freezes) == 1 and wd.frozen.is_set()
    assert freezes[0].detection_latency_s < 3.0


def test_no_freeze_while_any_stream_progresses_or_nothing_in_flight() -> None:
    clock = Clock()
    wd = _wd(clock, stall=100.0)
    a, b = _stream(wd, clock, "a"), _stream(wd, clock, "b")
    _run_ticks(wd, clock, 5.0, progress=[a])
    wd.unregister(a)
    wd.unregister(b)
    _run_ticks(wd, clock, 5.0)
    assert wd.events == []


def test_freeze_before_any_output_waits_for_the_first_token_deadline() -> None:
    clock = Clock()
    wd = _wd(clock, ftd=6.0)
    _stream(wd, clock, "r", first=False)
    _run_ticks(wd, clock, 4.0)
    assert not wd.frozen.is_set()  # a slow prefill is not a freeze
    _run_ticks(wd, clock, 2.5)
    assert wd.frozen.is_set()


def _gauges(running: float, tokens: float, gen_throughput: float | None = None) -> ServerGauges:
    return ServerGauges(
        running=running,
        queued=0.0,
        gen_throughput=gen_throughput,
        aborted_total=0.0,
        engine_types=("decode",),
        decode_tokens=tokens,
    )


def test_freeze_from_metrics_running_and_no_decode_progress_even_with_frozen_throughput() -> None:
    """0.5.23's wedge as a scrape shows it: running > 0 and gen_throughput > 0 frozen at their
    last values, and the progress counter standing still."""
    clock = Clock()
    wd = _wd(clock)
    tokens = 0.0
    for _ in range(10):  # healthy: the counter moves on every scrape (per-iteration bumps)
        tokens += 12 * 6
        wd.observe_metrics("http://d/metrics", _gauges(12.0, tokens, 900.0))
        clock.advance(0.5)
    for _ in range(10):  # wedged: nothing moves, gen_throughput stays 900
        wd.observe_metrics("http://d/metrics", _gauges(12.0, tokens, 900.0))
        clock.advance(0.5)
    assert [e.kind for e in wd.events] == [W.FREEZE_METRICS] and wd.frozen.is_set()
    assert 2.0 <= wd.events[0].detection_latency_s <= 3.0
    wd.observe_metrics("http://d/metrics", _gauges(12.0, tokens + 72, 900.0))  # recovered
    wd.observe_metrics("http://d/metrics", _gauges(0.0, tokens + 72, 0.0))  # idle is not frozen
    assert len(wd.events) == 1


def test_gen_throughput_zero_is_not_a_freeze_while_the_counter_moves() -> None:
    clock = Clock()
    wd = _wd(clock)
    for i in range(20):
        wd.observe_metrics("http://d/metrics", _gauges(12.0, 100.0 + 72 * i, 0.0))
        clock.advance(0.5)
    assert wd.events == []


def test_a_freeze_seen_in_the_metrics_cuts_streams_still_waiting_for_a_first_token() -> None:
    """A wedged decode after an abort cascade: nothing ever streams, the metrics say running > 0
    and the progress counter stopped. The suite must end a grace after that detection, not at
    the 60 s first-token deadline."""

    async def main() -> tuple[RequestRecord, float, Watchdog]:
        wd = Watchdog(first_token_deadline_s=60, stall_s=0.2, freeze_s=0.2, tick_s=0.02)
        rec = RequestRecord(rid="w")

        async def waiting() -> None:
            rec.t_send = wd._now()
            wd.register(rec, asyncio.current_task())
            await asyncio.sleep(30)

        async def frozen_metrics() -> None:
            tokens = 0.0
            for _ in range(4):  # healthy scrapes first: per-iteration bumps, 50 ms apart
                tokens += 32 * 3
                wd.observe_metrics("http://d/metrics", _gauges(32.0, tokens, 500.0))
                await asyncio.sleep(0.05)
            while True:
                wd.observe_metrics("http://d/metrics", _gauges(32.0, tokens, 500.0))
                await asyncio.sleep(0.05)

        t0 = asyncio.get_running_loop().time()
        async with wd:
            task = asyncio.create_task(waiting())
            sampler = asyncio.create_task(frozen_metrics())
            done, _ = await asyncio.wait([task], timeout=5)
            sampler.cancel()
        assert task in done and task.cancelled()
        return rec, asyncio.get_running_loop().time() - t0, wd

    rec, took, wd = asyncio.run(main())
    assert rec.extra["hang"] == W.FREEZE_METRICS
    assert took < 2.0  # freeze_s + the cut grace, with room for a busy machine
    assert [e.kind for e in wd.events] == [W.FREEZE_METRICS]


def test_flagged_streams_are_cut_after_the_grace() -> None:
    async def main() -> RequestRecord:
        wd = Watchdog(stall_s=0.2, freeze_s=60, tick_s=0.02)
        rec = RequestRecord(rid="x")

        async def silent() -> None:
            rec.t_send = rec.t_first = rec.t_last = wd._now()
            wd.register(rec, asyncio.current_task())
            await asyncio.sleep(30)

        async with wd:
            task = asyncio.create_task(silent())
            done, _ = await asyncio.wait([task], timeout=5)
        assert task in done and task.cancelled()
        return rec

    rec = asyncio.run(main())
    assert rec.extra["hang"] == W.STALL
