"""The drain's idle decision on evidence that is not stale (issue 20): SGLang 0.5.23 publishes
num_running_reqs every decode-log-interval iterations, so a 0 gauge can hide an open stream;
the progress counter, which moves every iteration, decides. A scripted control: no timers raced,
the clock is a FakeClock."""

from __future__ import annotations

from dsv4ops.orchestrate.drain import DrainWatch
from dsv4ops.remote.base import ProcessState
from testing.clock import FakeClock
from testing.orchestrate import Reply, make_deployment


class _Gauges:
    """/metrics of one decode whose gauge reads 0 throughout while its counter moves for the
    first `moving` reads (a stream the lagging gauge does not show), then stands still."""

    def __init__(self, moving: int) -> None:
        self.moving, self.reads, self.tokens = moving, 0, 100.0

    def http(self, url, **_kw):  # type: ignore[no-untyped-def]
        self.reads += 1
        if self.reads <= self.moving:
            self.tokens += 7
        return Reply(
            200,
            'sglang:num_running_reqs{tp_rank="0"} 0\n'
            'sglang:num_queue_reqs{tp_rank="0"} 0\n'
            f'sglang:realtime_tokens_total{{mode="decode"}} {self.tokens}\n',
        )

    def http_many(self, requests, timeout_s=10.0):  # type: ignore[no-untyped-def]
        return [self.http(u) for u in requests]  # type: ignore[no-untyped-call]

    def status(self, names, ports=None):  # type: ignore[no-untyped-def]
        return {n: ProcessState(name=n, pid=1, alive=True) for n in names}


def _watch(control: _Gauges, clock: FakeClock) -> DrainWatch:
    decode = make_deployment("baseline").component("decode")
    return DrainWatch(
        control,  # type: ignore[arg-type]
        [decode],
        clock=clock,
        progress=lambda _l: None,
        with_router=False,
        router_up=False,
        t0=clock.monotonic(),
    )


def test_a_zero_gauge_with_a_moving_counter_is_waited_for() -> None:
    clock = FakeClock()
    control = _Gauges(moving=20)  # 2 s of polls: the stream the gauge hides
    watch = _watch(control, clock)
    assert watch.wait(30.0) is None  # drained, after the stream ended ...
    assert control.reads > 20 and clock.monotonic() - 1000.0 >= 2.0 + watch.confirm_s - 0.1
    assert watch.peak == {"decode": 1.0}  # ... and said it waited for one
    assert watch.drained(None).startswith("waited for in-flight requests (decode up to 1)")


def test_an_idle_worker_is_confirmed_quickly() -> None:
    clock = FakeClock()
    control = _Gauges(moving=0)
    watch = _watch(control, clock)
    assert watch.wait(30.0) is None
    assert clock.monotonic() - 1000.0 < 1.0 and watch.peak == {}
    assert watch.drained(None) == "no requests in flight"


class _DeadDecode:
    """A prefill holding one request (its gauges steady) and a decode that is not running (its
    port refused, the target says not alive): the decode SIGKILLed mid-stream."""

    def __init__(self) -> None:
        self.reads = 0

    def http_many(self, requests, timeout_s=10.0):  # type: ignore[no-untyped-def]
        self.reads += 1
        prefill = Reply(
            200,
            'sglang:num_running_reqs{tp_rank="0"} 1\nsglang:num_queue_reqs{tp_rank="0"} 0\n',
        )
        return [prefill, Reply(None, error="connection refused")]

    def status(self, names, ports=None):  # type: ignore[no-untyped-def]
        return {n: ProcessState(name=n, pid=1, alive=n != "decode") for n in names}


def test_a_prefill_busy_for_a_decode_that_is_not_running_is_not_waited_for() -> None:
    clock = FakeClock()
    d = make_deployment("baseline")
    watch = DrainWatch(
        _DeadDecode(),  # type: ignore[arg-type]
        [d.component("prefill"), d.component("decode")],
        clock=clock,
        progress=lambda _l: None,
        with_router=False,
        router_up=False,
        t0=clock.monotonic(),
    )
    busy = watch.wait(15.0)
    assert busy is not None and set(busy) == {"prefill"}
    assert clock.monotonic() - 1000.0 < 0.5  # at once, not after the 15 s bound
    assert watch.down == {"decode"}
    assert (
        "prefill: 1 running/0 queued for a decode that is not running" in watch.stalled["prefill"]
    )
