"""The metrics-side wedge detector on synthetic scrapes: never a healthy server between two
log-interval bumps, a wedge within two log intervals, and no gen_throughput anywhere."""

from __future__ import annotations

import inspect

import pytest

from dsv4ops.canary import progress
from dsv4ops.canary.progress import ProgressDetector, Stall

S = 1_000_000_000
URL = "http://decode/metrics"
SCRAPE_S = 0.5
LOG_INTERVAL_S = 40 * 0.080  # 40 iterations of 80 ms at ~60 running: one bump per 3.2 s


class Server:
    """A decode whose counter moves only every log interval (the worst case for a detector)."""

    def __init__(self, running: float = 60.0, log_interval_s: float = LOG_INTERVAL_S) -> None:
        self.running = running
        self.log_interval_s = log_interval_s
        self.tokens = 0.0
        self.next_bump = log_interval_s
        self.wedged_at: float | None = None

    def advance_to(self, t: float) -> None:
        while self.next_bump <= t and (self.wedged_at is None or self.next_bump < self.wedged_at):
            self.tokens += self.running * 40
            self.next_bump += self.log_interval_s


def _scrape(det: ProgressDetector, server: Server, t: float, in_flight: int = 0) -> Stall | None:
    server.advance_to(t)
    return det.observe(
        URL,
        int(t * S),
        running=server.running,
        queued=0.0,
        decode_tokens=server.tokens,
        engine_types=("decode",),
        in_flight=in_flight,
    )


def _run(det: ProgressDetector, server: Server, t0: float, t1: float, **kw: int) -> list[Stall]:
    stalls, t = [], t0
    while t < t1:
        got = _scrape(det, server, t, **kw)
        if got is not None:
            stalls.append(got)
        t = round(t + SCRAPE_S, 6)
    return stalls


def test_a_healthy_server_between_log_interval_bumps_is_never_flagged() -> None:
    det = ProgressDetector(min_window_s=2.0)
    # 3.2 s between bumps is longer than the 2 s stream-silence window: a detector with a fixed
    # 2 s window would call this healthy server wedged every interval.
    assert LOG_INTERVAL_S > 2.0
    assert _run(det, Server(), 0.0, 120.0) == []


@pytest.mark.parametrize("phase", [0.1, 1.0, 2.0, 3.1])
def test_a_wedge_is_confirmed_within_two_log_intervals_of_the_stall(phase: float) -> None:
    det, server = ProgressDetector(min_window_s=2.0), Server()
    assert _run(det, server, 0.0, 30.0) == []
    stall_at = 30.0 + phase  # anywhere inside a log interval
    server.wedged_at = stall_at
    stalls = _run(det, server, 30.0, 60.0)
    assert len(stalls) == 1  # once per episode
    detected_s = stalls[0].detected_ns / S
    assert stall_at < detected_s <= stall_at + 2 * LOG_INTERVAL_S, (stall_at, detected_s)


def test_before_any_bump_was_seen_the_first_log_interval_is_not_a_wedge() -> None:
    det = ProgressDetector(min_window_s=2.0)
    server = Server()
    assert _run(det, server, 0.0, 3.0) == []  # busy, no bump yet, 3 s in
    assert det.window_ns(URL) > LOG_INTERVAL_S * S


def test_a_bigger_batch_than_the_last_report_widens_the_window() -> None:
    det, server = ProgressDetector(min_window_s=2.0), Server(running=1.0, log_interval_s=0.76)
    assert _run(det, server, 0.0, 10.0, in_flight=1) == []
    # the canary now has 60 requests in flight; the gauges still say 1 until the next log, and
    # the next bump comes a 60-running log interval (3.2 s) later
    server.running, server.log_interval_s = 60.0, 3.2
    server.next_bump = max(server.next_bump, 10.0) + 3.2
    assert _run(det, server, 10.0, 30.0, in_flight=60) == []


def test_per_iteration_bumps_are_inferred_and_confirm_a_wedge_fast() -> None:
    """SGLang 0.5.23's own cadence: every iteration, so the counter moves between any two
    scrapes; after three such changes the window drops to its floor."""
    det = ProgressDetector(min_window_s=2.0)
    tokens = 0.0
    for i in range(10):
        tokens += 60 * 6  # 6 iterations of 80 ms per 0.5 s scrape
        assert (
            det.observe(URL, int(i * SCRAPE_S * S), running=60, queued=0, decode_tokens=tokens)
            is None
        )
    assert det.window_ns(URL) == 2 * S
    stall = None
    t = 5.0
    while stall is None and t < 20:
        stall = det.observe(URL, int(t * S), running=60, queued=0, decode_tokens=tokens)
        t += SCRAPE_S
    assert stall is not None and (stall.detected_ns - stall.since_ns) / S < 3.0


def test_idle_prefill_and_servers_without_the_counter_are_not_judged() -> None:
    det = ProgressDetector(min_window_s=0.5)
    for i in range(40):
        t = int(i * SCRAPE_S * S)
        assert det.observe("idle", t, running=0, queued=0, decode_tokens=5.0) is None
        assert (
            det.observe(
                "prefill", t, running=1, queued=0, decode_tokens=0.0, engine_types=("prefill",)
            )
            is None
        )
        assert det.observe("old", t, running=9, queued=0, decode_tokens=None) is None
    # queued work with nothing running and no progress is a stall
    for i in range(40):
        got = det.observe("q", int(i * SCRAPE_S * S), running=0, queued=3, decode_tokens=5.0)
        if got is not None:
            break
    assert got is not None


def test_the_detector_takes_no_gen_throughput() -> None:
    assert "gen_throughput" not in inspect.getsource(progress).split('"""', 2)[2]
    assert "gen_throughput" not in inspect.signature(ProgressDetector.observe).parameters
