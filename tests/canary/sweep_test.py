"""The sweep's per-level numbers, on recorded streams (the staircase itself runs in suites_test
against the fake server and in twin_e2e_test behind the real router)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dsv4ops.canary import records as R
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.suites.sweep import _level_points

S = 1_000_000_000
MS = 1_000_000


def _stream(rid: str, step_ms: float, n: int, error: str | None = None) -> RequestRecord:
    rec = RequestRecord(rid=rid, t_send=S, t_end=S + n * int(step_ms * MS) + MS, error=error)
    rec.token_times = [S + k * int(step_ms * MS) for k in range(1, n + 1)]
    return rec


def test_a_level_counts_every_token_received_in_its_window() -> None:
    # two healthy streams at 10 ms a step, one cut by the suite, and one that failed mid-way (the
    # server broke it): all four delivered 100 tokens inside the 1-second window
    records = [_stream("a", 10, 100), _stream("b", 10, 100), _stream("c", 10, 100, R.ERR_CANCELLED),
               _stream("d", 10, 100, R.ERR_DISCONNECT)]
    h = SimpleNamespace(records=records, sampler=SimpleNamespace(decode_url=lambda: None))
    [point] = _level_points(h, [4], [(S, 2 * S)])  # type: ignore[arg-type]
    assert point.output_tok_s == pytest.approx(400.0)
    assert point.step_ms == pytest.approx(10.0)
