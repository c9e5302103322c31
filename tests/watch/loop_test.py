"""The loop behind the clock seam: rounds every interval, probes on their own schedule, only
reads (GET /metrics, GET /health, probe generations through the router), and `--once` watches
for one wedge window before its worst finding becomes the exit code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from dsv4ops.remote.results import HttpReply
from dsv4ops.watch import Round, Severity, Watcher, WatchSettings
from testing.clock import FakeClock
from testing.watch import ENDPOINTS, FakeUnit


def test_rounds_every_interval_probes_every_probe_period_and_nothing_but_reads() -> None:
    unit = FakeUnit()
    clock = FakeClock()
    w = Watcher(ENDPOINTS, WatchSettings(interval_s=5, probe_every_s=30), unit, clock)
    rounds: list[Round] = []
    w.run(rounds.append, max_rounds=13)
    assert len(rounds) == 13 and clock.monotonic() == 1000.0 + 13 * 5
    assert [r.number for r in rounds if r.probes] == [1, 7, 13]
    for req in unit.requests:
        if req.get("method", "GET") == "GET":
            assert req["url"].endswith(("/metrics", "/health")), req
        else:
            assert req["method"] == "POST" and req["url"] == "http://t:9000/v1/chat/completions"
    assert {r["timeout_s"] for r in unit.requests if r.get("method") == "POST"} == {20.0}


def test_a_scaled_twin_runs_the_same_windows_in_wall_time() -> None:
    unit = FakeUnit()
    clock = FakeClock()
    w = Watcher(ENDPOINTS, WatchSettings(time_scale=0.1), unit, clock)
    w.run(lambda r: None, max_rounds=7)
    assert round(clock.monotonic() - 1000.0, 6) == 3.5  # 7 rounds of 5 model s at 0.1
    assert {r["timeout_s"] for r in unit.requests if r.get("method") == "POST"} == {2.0}


def test_once_watches_one_wedge_window_and_reports_the_worst() -> None:
    unit = FakeUnit()
    clock = FakeClock()
    w = Watcher(ENDPOINTS, WatchSettings(), unit, clock)
    seen: list[Round] = []
    last = w.once(seen.append)
    assert last.worst is Severity.OK and len(seen) == 6  # t = 0 .. 25 s: the window + a scrape
    unit2 = FakeUnit(probe="stall")
    unit2.decode.running, unit2.decode.tokens = 5, 100
    last = Watcher(ENDPOINTS, WatchSettings(), unit2, FakeClock()).once(lambda r: None)
    assert last.worst is Severity.CRITICAL
    assert {f.code for f in last.findings} == {"decode_wedged", "probe_stalled"}
    warn = FakeUnit(probe="fail")
    assert (
        Watcher(ENDPOINTS, WatchSettings(), warn, FakeClock()).once(lambda r: None).worst
        is Severity.WARNING
    )


def test_an_unreachable_target_is_components_down_not_a_stalled_unit_and_watch_goes_on() -> None:
    from dsv4ops.errors import TargetError

    unit = FakeUnit()
    calls = {"n": 0}

    def flaky(requests: Sequence[Mapping[str, Any]], *, timeout_s: float = 10.0) -> list[HttpReply]:
        calls["n"] += 1
        if 2 <= calls["n"] <= 4:
            raise TargetError("box: ssh: connection reset")
        return unit(requests, timeout_s=timeout_s)

    rounds: list[Round] = []
    Watcher(ENDPOINTS, WatchSettings(), flaky, FakeClock()).run(rounds.append, max_rounds=6)
    codes = [{f.code for f in r.findings} for r in rounds]
    assert codes[0] == set() and codes[1] == set()  # one failed round: not yet
    assert codes[2] == codes[3] == {"component_down"} and not codes[5]
    down = next(f for f in rounds[2].findings)
    assert "target unreachable: box: ssh: connection reset" in down.evidence[0]
    assert all(not r.probes for r in rounds[1:4])


def test_a_silent_unit_is_never_ok_and_once_ends_unknown_or_critical_not_ok() -> None:
    """A router that accepts connections and never answers (issue 20): the batch times out, the
    probes are dropped, nothing answered. No round says "ok"; `--once` does not either."""
    from dsv4ops import exitcodes
    from dsv4ops.errors import TargetError

    def silent(requests: Sequence[Mapping[str, Any]], *, timeout_s: float = 10.0) -> NoReturn:
        raise TargetError("http_many: no answer within 5 s")

    w = Watcher(ENDPOINTS, WatchSettings(), silent, FakeClock())
    first = w.tick()
    assert first.worst is Severity.OK and first.findings == ()  # no finding after one scrape ...
    assert first.word == "unknown" and not first.answered  # ... and still no OK
    assert set(first.to_json()["unanswered"]) == {"prefill", "decode", "router"}
    seen: list[Round] = []
    last = Watcher(ENDPOINTS, WatchSettings(), silent, FakeClock()).once(seen.append)
    assert all(r.word != "ok" for r in seen)
    assert exitcodes.for_severity(last.word) != exitcodes.OK


def test_once_with_every_probe_unanswered_is_critical_not_ok() -> None:
    """An idle decode (no wedge to see in its counters) whose probes never come back: the
    scrapes answer, but `--once` does not call it OK; the stalled probe round decides."""
    from dsv4ops import exitcodes

    last = Watcher(ENDPOINTS, WatchSettings(), FakeUnit(probe="stall"), FakeClock()).once(
        lambda r: None
    )
    assert last.word == "critical" and {f.code for f in last.findings} == {"probe_stalled"}
    assert exitcodes.for_severity(last.word) == exitcodes.FAILED


def test_once_exits_with_the_worst_finding_of_any_round_not_only_the_last() -> None:
    # issue 40: five CRITICAL rounds, then a WARNING, exited 4
    from dsv4ops import exitcodes
    from dsv4ops.watch.loop import with_worst_seen
    from testing.watch import ClockedWedge

    stalled = FakeUnit(probe="stall")
    stalled.decode.running, stalled.decode.tokens = 5, 100
    critical = Watcher(ENDPOINTS, WatchSettings(), stalled, FakeClock()).once(lambda r: None)
    healthy = Watcher(ENDPOINTS, WatchSettings(), FakeUnit(), FakeClock()).once(lambda r: None)
    assert (critical.word, healthy.word) == ("critical", "ok")
    merged = with_worst_seen(healthy, [critical])
    assert merged.word == "critical" and exitcodes.for_severity(merged.word) == exitcodes.FAILED
    assert {f.code for f in merged.findings} == {"decode_wedged", "probe_stalled"}
    assert all(f"seen in round {critical.number}" in f.evidence[-1] for f in merged.findings)
    assert with_worst_seen(critical, [healthy]) is critical  # nothing worse to carry

    # through once(): the stream blind in the first round only -> the watch ends "warning"
    clock = FakeClock()
    scripted = ClockedWedge(clock, clock.monotonic() + 1e9, blind_why="refused x3")

    def emit(r: Round) -> None:
        scripted.blind_why = None  # the stream comes back after the first round

    w = Watcher(ENDPOINTS, WatchSettings(), scripted, clock, probe=False, stream=scripted)
    last = w.once(emit)
    assert last.word == "warning", last.findings
    assert [f.code for f in last.findings] == ["probe_stream_blind"]
    assert "seen in round 1 of this watch" in last.findings[0].evidence[-1]
