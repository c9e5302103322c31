"""The sweep's per-level numbers, on recorded streams (the staircase itself runs in suites_test
against the fake server and in twin_e2e_test behind the real router)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dsv4ops.canary import records as R
from dsv4ops.canary.fit import mean_ci95
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.suites.sweep import _level_points
from dsv4ops.metrics.prom import ServerGauges

S = 1_000_000_000
MS = 1_000_000


def _stream(rid: str, step_ms: float, n: int, error: str | None = None) -> RequestRecord:
    rec = RequestRecord(rid=rid, t_send=S, t_end=S + n * int(step_ms * MS) + MS, error=error)
    rec.token_times = [S + k * int(step_ms * MS) for k in range(1, n + 1)]
    return rec


def test_a_level_counts_every_token_received_in_its_window() -> None:
    # two healthy streams at 10 ms a step, one cut by the suite, and one that failed mid-way (the
    # server broke it): all four delivered 100 tokens inside the 1-second window
    records = [
        _stream("a", 10, 100),
        _stream("b", 10, 100),
        _stream("c", 10, 100, R.ERR_CANCELLED),
        _stream("d", 10, 100, R.ERR_DISCONNECT),
    ]
    h = SimpleNamespace(records=records, sampler=SimpleNamespace(decode_url=lambda: None))
    [point] = _level_points(h, [4], [(S, 2 * S)])  # type: ignore[arg-type]
    assert point.output_tok_s == pytest.approx(400.0)
    assert point.step_ms == pytest.approx(10.0)


def test_streams_whose_tokens_came_in_one_chunk_give_no_step_time() -> None:
    """issue 21, F6: `--max-tokens 16` streams coalesced into one chunk measured a 0 ms step, the
    two-level law went through it and the off-law check divided by zero (ab exit 3)."""
    chunked = [_stream(f"s{i}", 0, 16) for i in range(4)]  # every token at the same instant
    h = SimpleNamespace(records=chunked, sampler=SimpleNamespace(decode_url=lambda: None))
    assert _level_points(h, [4], [(S, 2 * S)]) == []  # type: ignore[arg-type]


def test_a_law_crossing_zero_is_reported_not_divided_by() -> None:
    from dsv4ops.canary.fit import LevelPoint, fit_line
    from dsv4ops.canary.suites.sweep_law import off_law

    law = fit_line([(4.0, 0.0), (8.0, 10.0)])  # step 0 ms at bs 4: 1000*bs/step has no value
    points = [LevelPoint(4, 4.0, 0.0, 100.0), LevelPoint(8, 8.0, 10.0, 800.0)]
    off, unusable = off_law(points, law, (), 5.0)
    assert off == [] and unusable == ["c4 (0.00 ms at bs 4)"]
    below = fit_line([(4.0, -2.0), (8.0, 10.0)])
    assert off_law(points, below, (), 5.0)[1] == ["c4 (-2.00 ms at bs 4)"]


def _gauges(running: float, tput: float) -> ServerGauges:
    return ServerGauges(
        running=running, queued=0.0, gen_throughput=tput, aborted_total=0.0, engine_types=()
    )


def _harness(window: list[ServerGauges]) -> SimpleNamespace:
    """Eight 10 ms streams over one level, the decode's scrapes in its window being `window`."""
    sampler = SimpleNamespace(decode_url=lambda: "http://decode", window=lambda _u, _a, _b: window)
    return SimpleNamespace(records=[_stream(f"s{i}", 10, 100) for i in range(8)], sampler=sampler)


def _level_with_scrapes(window: list[ServerGauges]) -> dict[int, tuple[Any, int]]:
    metrics_ci: dict[int, tuple[Any, int]] = {}
    _level_points(_harness(window), [8], [(S, 2 * S)], metrics_ci)  # type: ignore[arg-type]
    return metrics_ci


def test_the_servers_noise_counts_its_reports_not_the_scrapes_that_read_them() -> None:
    """Every scrape between two logs reads the same published report. Counted per scrape, one
    report gave a zero-width CI ("three samples" of one number) and the 56 -> 57 drop was then
    judged against a certainty nobody observed."""
    # the first report (running 8 after a level change) is not a whole interval; each later
    # report is scraped three times
    reports = [(8.0, 790.0), (8.0, 800.0), (8.0, 810.0), (8.0, 795.0)]
    window = [_gauges(run, tput) for run, tput in reports for _ in range(3)]
    ci, n = _level_with_scrapes(window)[8]
    assert n == 3 and ci == mean_ci95([800.0, 810.0, 795.0])
    # one whole report, however often scraped, is one sample: no CI (the slices' is used instead)
    one = [_gauges(8.0, 790.0)] * 2 + [_gauges(8.0, 800.0)] * 4
    assert _level_with_scrapes(one)[8] == (None, 1)


def _batch_of_level(concurrency: int, window: list[ServerGauges]) -> float:
    [point] = _level_points(_harness(window), [concurrency], [(S, 2 * S)])  # type: ignore[arg-type]
    return point.bs


def test_a_health_probe_in_a_logged_step_does_not_move_the_level_to_the_next_graph() -> None:
    """The router's /health on the decode is a 1-token generation: in the step that logs a report,
    it makes the report one above the level's batch. Read by three scrapes of six, the median of
    the scrapes said 56.5 at c56, i.e. the 64 graph, and the 56 -> 57 sawtooth went unseen."""
    probe_read_thrice = [_gauges(56.0, 700.0), _gauges(57.0, 702.0), _gauges(57.0, 702.0)]
    window = probe_read_thrice + [_gauges(57.0, 702.0), _gauges(56.0, 699.0), _gauges(56.0, 701.0)]
    assert _batch_of_level(56, window) == 56.0
    # one report each way: the reports cannot say, the level's own concurrency does
    assert _batch_of_level(57, [_gauges(58.0, 671.0)] * 3 + [_gauges(57.0, 672.0)]) == 57.0
    assert _batch_of_level(57, [_gauges(57.0, 672.0), _gauges(58.0, 671.0)] * 2) == 57.0


def test_the_servers_batch_beats_the_concurrency_when_most_reports_say_so() -> None:
    capped = [_gauges(48.0, 650.0 + i) for i in range(4)]  # --max-running-requests 48 at c57
    assert _batch_of_level(57, capped) == 48.0
    users = [_gauges(60.0, 690.0), _gauges(60.0, 691.0), _gauges(59.0, 688.0)]  # other traffic
    assert _batch_of_level(57, users) == 60.0
    assert _batch_of_level(57, []) == 57.0  # no report in the window: what the sweep sent


def _fit_of(points: list[tuple[float, float]]) -> Any:
    from dsv4ops.canary.fit import fit_line

    return fit_line(points)


def test_a_line_through_two_levels_is_not_reported_as_a_law() -> None:
    # issue 38: 2 of 3 levels usable on the real server gave R² 1 by construction and a slope
    # of -6.9 ms/request, reported as a law with ceiling inf
    from dsv4ops.canary.suites.sweep_law import law_problem, lawful

    two = _fit_of([(1, 30.0), (2, 23.1)])
    assert two.r2 == pytest.approx(1.0)
    assert "2 usable level(s)" in (law_problem(two) or "")
    falling = _fit_of([(1, 30.0), (2, 23.1), (4, 20.0)])
    assert "does not grow with the batch" in (law_problem(falling) or "")
    good = _fit_of([(8, 26.4), (16, 34.8), (32, 51.6)])
    assert law_problem(good) is None
    laws, why = lawful({"bs": good, "padded_bs": two})
    assert list(laws) == ["bs"] and list(why) == ["padded_bs"]


def test_a_metrics_law_missing_a_level_is_not_the_sweeps_law() -> None:
    # issue 38: on the real CPU decode the 16-running level (~300 ms a step) had no whole 40-step
    # report in its window; the metrics law through the other three (R² 0.989) was judged as the
    # law and passed a sweep whose client-measured step at 16 it missed by 2x
    from dsv4ops.canary.fit import LevelPoint
    from dsv4ops.canary.suites.sweep_law import fit_laws, lawful, primary_law

    def level(c: int, client: float, server: float | None) -> LevelPoint:
        tput = None if server is None else 1000.0 * c / server
        return LevelPoint(c, float(c), client, 1000.0 * c / client, server, tput)

    points = [level(1, 72.4, 55.5), level(4, 81.4, 67.5), level(8, 97.8, 91.2)]
    whole = [*points, level(16, 294.4, 290.0)]
    law, server_side, why = primary_law(lawful(fit_laws(whole, (1, 2, 4, 8, 16)))[0], whole)
    assert server_side and why == {} and law is not None and law.n == 4
    cut = [*points, level(16, 294.4, None)]
    fits = lawful(fit_laws(cut, (1, 2, 4, 8, 16)))[0]
    assert fits["metrics"].n == 3 and fits["metrics"].r2 > 0.9  # a law, of three levels
    law, server_side, why = primary_law(fits, cut)
    assert not server_side and law is fits["padded_bs"] and law.n == 4 and law.r2 < 0.9
    assert "no whole-interval decode report at c16" in why["metrics"]


def test_the_one_stream_of_concurrency_1_measures_its_level() -> None:
    # issue 38: a closed loop of one stream sends its next request only when the last ends, so
    # a level-1 window holds one stream: with two streams required, batch 1 was never measured
    one = SimpleNamespace(
        records=[_stream("a", 20, 200)], sampler=SimpleNamespace(decode_url=lambda: None)
    )
    [point] = _level_points(one, [1], [(S, 2 * S)])  # type: ignore[arg-type]
    assert point.step_ms == pytest.approx(20.0) and point.bs == 1.0
    # at a higher level one stream is not the level's batch: no step time from it
    assert _level_points(one, [4], [(S, 2 * S)]) == []  # type: ignore[arg-type]


def test_levels_padded_into_one_graph_count_once() -> None:
    # three levels, but 20 and 24 both run the 24 graph: two distinct x values, no law
    from dsv4ops.canary.suites.sweep_law import law_problem

    fit = _fit_of([(8, 26.4), (24, 43.2), (24, 43.0)])
    assert fit.levels == 2 and law_problem(fit) is not None
