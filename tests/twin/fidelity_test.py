"""Fidelity: a concurrency staircase measured from the client reproduces the seeds' step law."""

from __future__ import annotations

import asyncio

import pytest

from testing.twin import measure_step_ms, twin_server

# serial: the step law is measured from the client's clock (testing/workers.py)
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SCALE = 0.2
ENV = {"DSV4_TWIN_TIME_SCALE": str(SCALE), "DSV4_TWIN_HAZARDS": "off"}
STEP8 = [str(b) for b in range(32, 97, 8)]
STEP4 = [str(b) for b in range(32, 97, 4)]


def _fit_line(xs: list[int], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return slope, my - slope * mx


def _steps(args: list[str], levels: list[int], tokens: int = 50) -> dict[int, float]:
    with twin_server(["--disaggregation-mode", "decode", *args], env=ENV) as proc:
        return {
            c: asyncio.run(measure_step_ms(proc.url, c, probe_tokens=tokens, time_scale=SCALE))
            for c in levels
        }


def test_staircase_fits_the_step_law_and_shows_the_seed_sawtooth() -> None:
    steps = _steps(
        ["--disable-overlap-schedule", "--cuda-graph-bs-decode", *STEP8],
        [32, 48, 56, 57, 64, 80, 96],
    )
    on_buckets = [c for c in steps if c != 57]
    b, a = _fit_line(on_buckets, [steps[c] for c in on_buckets])
    assert a == pytest.approx(18.0, rel=0.03), steps
    assert b == pytest.approx(1.05, rel=0.03), steps
    tok_s = {c: c / steps[c] * 1000 for c in (56, 57)}
    assert tok_s[56] == pytest.approx(726, rel=0.03), tok_s
    assert tok_s[57] == pytest.approx(663, rel=0.03), tok_s

    # Step-4 buckets pad 57 to 60 instead of 64: the drop shrinks.
    fine = _steps(["--disable-overlap-schedule", "--cuda-graph-bs-decode", *STEP4], [56, 57])
    fine_tok_s = {c: c / fine[c] * 1000 for c in (56, 57)}
    drop8 = 1 - tok_s[57] / tok_s[56]
    drop4 = 1 - fine_tok_s[57] / fine_tok_s[56]
    assert drop4 < drop8 * 0.6, (drop4, drop8)


def test_overlap_scheduler_gains_5_to_7_percent_at_high_concurrency() -> None:
    off = _steps(["--disable-overlap-schedule", "--cuda-graph-bs-decode", *STEP8], [64])[64]
    on = _steps(["--cuda-graph-bs-decode", *STEP8], [64])[64]
    assert 1.045 <= off / on <= 1.08, (off, on)
