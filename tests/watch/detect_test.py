"""Detection through the Watcher with a fake clock and a scripted unit (real Prometheus text,
parsed by prometheus_client): each finding appears when its evidence holds for its window and
not before, and the look-alikes a naive rule reports (idle, slow counters, old failures, a
queue that drains, a different load) stay quiet."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dsv4ops.watch import Baseline, Round, Watcher, WatchSettings
from testing.clock import FakeClock
from testing.watch import ENDPOINTS, FakeUnit

S = WatchSettings(max_decode_bucket=16)  # box defaults: 5 s scrapes, wedge window 20 s


def _watch(
    unit: FakeUnit, settings: WatchSettings = S, probe: bool = False
) -> tuple[Watcher, FakeClock]:
    clock = FakeClock()
    return Watcher(ENDPOINTS, settings, unit, clock, probe=probe), clock


def _rounds(
    w: Watcher, clock: FakeClock, n: int, each: Callable[[], object] | None = None
) -> list[Round]:
    out = []
    for _ in range(n):
        if each is not None:
            each()
        out.append(w.tick())
        clock.advance(w.settings.interval_s)
    return out


def _codes(r: Round) -> set[str]:
    return {f.code for f in r.findings}


def test_a_busy_progressing_unit_has_no_finding() -> None:
    unit = FakeUnit()
    w, clock = _watch(unit, probe=True)
    rounds = _rounds(w, clock, 40, unit.decoding)  # 200 s, 7 probe rounds
    assert all(not r.findings for r in rounds), [f.line() for r in rounds for f in r.findings]
    assert sum(1 for r in rounds if r.probes) == 7
    assert all(p.status == "ok" for r in rounds for p in r.probes)


def test_frozen_progress_with_running_requests_is_a_wedge_after_the_window_only() -> None:
    unit = FakeUnit()
    w, clock = _watch(unit)
    _rounds(w, clock, 3, unit.decoding)
    unit.decode.running = 12  # rank 0 blocked: gauges keep their last values, the counter stops
    # the counter last moved at the last busy scrape; these are 5, 10, ..., 30 s after it
    frozen = _rounds(w, clock, 6)
    assert [("decode_wedged" in _codes(r)) for r in frozen] == [False] * 3 + [True] * 3
    f = next(f for f in frozen[-1].findings if f.code == "decode_wedged")
    assert f.severity.name == "CRITICAL" and f.runbook == "decode-wedge"
    assert "num_running_reqs 12" in f.evidence[0] and "stuck at" in f.evidence[1]


def test_idle_and_slow_counters_are_not_wedges() -> None:
    unit = FakeUnit()
    w, clock = _watch(unit)
    unit.decode.tokens, unit.decode.running = 500, 0  # idle: nothing running, nothing moves
    assert all(not r.findings for r in _rounds(w, clock, 10))
    unit.decode.running = 3
    ticks = iter(range(1000))

    def every_third() -> None:  # the counter moves once per 15 s (a long log interval)
        if next(ticks) % 3 == 0:
            unit.decode.tokens += 40

    assert all(not r.findings for r in _rounds(w, clock, 12, every_third))


def test_failure_counters_rising_are_reported_for_the_window_old_ones_are_not() -> None:
    unit = FakeUnit()
    unit.prefill.transfer_failed = 5  # there before watch started: history
    w, clock = _watch(unit)
    assert not _rounds(w, clock, 3, unit.decoding)[-1].findings
    unit.decode.bootstrap_failed = 1  # a labelled child born at 1 (multiprocess mode)
    unit.prefill.transfer_failed = 6
    r = _rounds(w, clock, 1, unit.decoding)[0]
    found = {f.component for f in r.findings if f.code == "pd_transfer_degraded"}
    assert found == {"prefill", "decode"}
    later = _rounds(w, clock, 61, unit.decoding)  # 305 s: past the 300 s window
    assert "pd_transfer_degraded" in _codes(later[0]) and not later[-1].findings


def test_router_5xx_while_every_worker_is_healthy_is_degradation() -> None:
    unit = FakeUnit()
    w, clock = _watch(unit)
    _rounds(w, clock, 2, unit.decoding)
    unit.responses_5xx = 3
    r = _rounds(w, clock, 1, unit.decoding)[0]
    assert [f.component for f in r.findings if f.code == "pd_transfer_degraded"] == ["router"]


def test_a_queue_that_never_drains_is_stuck_one_that_drains_is_not() -> None:
    unit = FakeUnit()
    unit.decode.queues = {"transfer": 3}
    unit.decode.tokens = 800
    w, clock = _watch(unit)
    rounds = _rounds(w, clock, 26)  # 125 s with the counter still
    assert "queue_stuck" not in _codes(rounds[23]) and "queue_stuck" in _codes(rounds[25])
    unit2 = FakeUnit()
    unit2.decode.queues = {"transfer": 3}
    w2, clock2 = _watch(unit2)
    assert all("queue_stuck" not in _codes(r) for r in _rounds(w2, clock2, 30, unit2.decoding))


def test_eager_passes_are_a_fallback_graph_passes_are_not() -> None:
    unit = FakeUnit()
    w, clock = _watch(unit)
    assert not any(r.findings for r in _rounds(w, clock, 4, unit.decoding))
    assert unit.decode.eager is not None
    unit.decode.eager += 30
    r = _rounds(w, clock, 1, unit.decoding)[0]
    f = next(f for f in r.findings if f.code == "eager_fallback")
    assert "30 of" in f.evidence[0] and "(16)" in f.summary and f.runbook == "bucket-tuning"
    assert "eager_fallback" not in _codes(_rounds(w, clock, 14, unit.decoding)[-1])  # > 60 s


def test_without_a_pass_counter_running_above_the_largest_bucket_is_the_sign() -> None:
    unit = FakeUnit()
    unit.decode.eager = None
    w, clock = _watch(unit)
    rounds = _rounds(w, clock, 3, lambda: unit.decoding(running=24))
    assert ["eager_fallback" in _codes(r) for r in rounds] == [False, True, True]


def test_throughput_below_the_canary_baseline_only_at_the_same_load() -> None:
    base = Baseline(tokens_per_s=1000.0, concurrency=8, source="deploy d-1 canary")
    unit = FakeUnit()
    w, clock = _watch(unit, replace(S, baseline=base))
    slow = _rounds(w, clock, 14, lambda: unit.decoding(tokens_per_scrape=1500, running=8))
    f = next(f for f in slow[-1].findings if f.code == "throughput_below_baseline")
    assert "300 tok/s" in f.evidence[0] and "deploy d-1 canary" in f.evidence[1]
    unit2 = FakeUnit()
    w2, clock2 = _watch(unit2, replace(S, baseline=base))
    light = _rounds(w2, clock2, 14, lambda: unit2.decoding(tokens_per_scrape=1500, running=2))
    assert not light[-1].findings  # a quarter of the load: not comparable
    unit3 = FakeUnit()
    w3, clock3 = _watch(unit3, replace(S, baseline=base))
    ok = _rounds(w3, clock3, 14, lambda: unit3.decoding(tokens_per_scrape=4500, running=8))
    assert not ok[-1].findings


def test_components_down_after_two_scrapes_and_unhealthy_workers() -> None:
    unit = FakeUnit()
    w, clock = _watch(unit)
    _rounds(w, clock, 2, unit.decoding)
    unit.decode.up = False
    rounds = _rounds(w, clock, 2)
    assert ["component_down" in _codes(r) for r in rounds] == [False, True]
    f = next(f for f in rounds[-1].findings if f.code == "component_down")
    assert f.component == "decode" and "connection refused" in f.evidence[0]
    assert f.runbook == "pd-safe-restart"
    unit.decode.up = True
    unit.worker_health["http://t:31001"] = 0.0
    r = _rounds(w, clock, 1, unit.decoding)[0]
    assert _codes(r) == {"worker_unhealthy"}


def test_durations_are_model_time_with_the_wall_seconds_and_scale_beside() -> None:
    """Issue 23: `stuck at 67734 for 258 s` about 26 s after the wedge, on a twin at 0.1, with
    nothing saying which clock: the figure names its clock and the scale."""
    from dsv4ops.watch.detect import Detector
    from dsv4ops.watch.settings import WatchSettings

    assert Detector(WatchSettings(time_scale=0.1))._scaled(25.8) == (
        "258 s model time (25.8 s wall at twin time scale 0.1)"
    )
    assert Detector(WatchSettings())._scaled(4.25) == "4.2 s"


def test_a_timeout_is_told_from_a_refusal_by_the_exception_never_by_its_text(
    tmp_path: Path,
) -> None:
    """Real requests from the agent: a port that accepts and never answers is a timeout by the
    exception's type (socket.timeout / URLError wrapping one), a closed port is not; the
    detector calls the first unresponsive and the second down whatever the error text says."""
    import sys

    from dsv4ops.remote import LocalExecutor, Supervisor
    from dsv4ops.watch.detect import Detector
    from dsv4ops.watch.readings import RouterReading, Scrape, server_reading
    from testing.ports import free_ports
    from testing.watch import silent_listeners

    silent, closed = free_ports(2)
    supervisor = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    with silent_listeners({silent}):
        hung, refused = supervisor.http_many(
            [f"http://127.0.0.1:{silent}/metrics", f"http://127.0.0.1:{closed}/metrics"],
            timeout_s=0.5,
        )
    assert (hung.status, hung.timed_out) == (None, True), hung
    assert (refused.status, refused.timed_out) == (None, False), refused
    # The text is not what decides: swap what the two say.
    hung = replace(hung, error="no answer within the deadline")
    refused = replace(refused, error="connection refused (the proxy said: timed out)")
    detector = Detector(S)
    found: list[str] = []
    for at in (0.0, 5.0):
        scrape = Scrape(
            at,
            {
                "prefill": server_reading("prefill", refused),
                "decode": server_reading("decode", hung),
            },
            RouterReading(),
        )
        found = [f"{f.code} {f.component}" for f in detector.observe(scrape)]
    assert "component_unresponsive decode" in found and "component_down prefill" in found, found
    assert "component_down decode" not in found and "component_unresponsive prefill" not in found


def test_a_health_timeout_alone_is_never_a_wedge_or_down() -> None:
    """Long chunked prefills fail /health without a wedge (sglang#22511): /health timing out on
    both workers while the decode progresses gives no finding at all."""
    unit = FakeUnit()
    unit.prefill.health = unit.decode.health = None
    w, clock = _watch(unit, probe=True)
    rounds = _rounds(w, clock, 40, unit.decoding)  # 200 s: past every window
    assert all(not r.findings for r in rounds), [f.line() for r in rounds for f in r.findings]
    assert rounds[-1].scrape.servers["decode"].health is None  # asked, and no answer came


def test_every_wedge_and_down_finding_names_evidence_beyond_health() -> None:
    from dsv4ops.watch.findings import WEDGE_OR_DOWN, Basis, Finding

    unit = FakeUnit()
    w, clock = _watch(unit)
    _rounds(w, clock, 3, unit.decoding)
    unit.decode.running, unit.decode.health = 12, None  # wedged: the counter stops
    unit.worker_health["http://t:31001"] = 0.0  # and the router's /health check fails it
    unit.prefill.up = False
    last = _rounds(w, clock, 6)[-1]
    found = {f.code: f for f in last.findings}
    assert {"decode_wedged", "component_down", "worker_unhealthy"} <= set(found)
    assert found["decode_wedged"].basis[:2] == (Basis.PROGRESS_COUNTER, Basis.RUNNING_GAUGE)
    assert found["component_down"].basis == (Basis.METRICS_SCRAPES,)
    assert found["worker_unhealthy"].basis == (Basis.ROUTER_HEALTH,)
    assert "sglang#22511" in found["worker_unhealthy"].evidence[1]
    for f in last.findings:
        if f.code in WEDGE_OR_DOWN:
            assert "judged by: " in f.line() and f.to_json()["basis"]
    # a wedge or down finding cannot be built on the router's /health verdict alone
    for basis in ((), (Basis.ROUTER_HEALTH,)):
        with pytest.raises(ValueError, match="needs evidence beyond /health"):
            Finding("decode_wedged", "decode", "x", ("y",), basis)


def test_a_transfer_queue_that_never_empties_is_reported_after_its_window_only() -> None:
    """NIXL sends the decode no failure notice (sglang#36033): requests held in the decode's
    transfer queue produce no token until SGLang's waiting timeout. Watch reports the queue that
    never empties for kv_stuck_s (60 s) while the decode serves others; one that drains between
    scrapes is quiet."""
    unit = FakeUnit()
    w, clock = _watch(unit)
    ticks = iter(range(1000))

    def draining() -> None:  # busy, and the transfer queue empties every other scrape
        unit.decoding()
        unit.decode.queues["transfer"] = float(next(ticks) % 2)

    assert all(not r.findings for r in _rounds(w, clock, 31, draining))  # ends empty
    unit.decode.queues["transfer"] = 2.0
    held = _rounds(w, clock, 16, unit.decoding)  # 0, 5, ..., 75 s after the first held scrape
    assert [("kv_transfer_stuck" in _codes(r)) for r in held] == [False] * 12 + [True] * 4
    (f,) = [f for f in held[-1].findings if f.code == "kv_transfer_stuck"]
    assert f.severity.name == "WARNING" and f.runbook == "bootstrap-degradation"
    assert "num_decode_transfer_queue_reqs >= 2 on every scrape for 75 s" in f.evidence[0]
    assert "serves other requests" in f.evidence[1] and "sglang#36033" in f.evidence[2]
    unit.decode.queues["transfer"] = 0.0
    assert not _rounds(w, clock, 1, unit.decoding)[0].findings
