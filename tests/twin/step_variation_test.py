"""Seeded step-time noise and slow drift (issue 14's twin settings), off by default."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest

from dsv4ops.twin.config import TwinConfigError, load_config
from dsv4ops.twin.perf import StepVariation
from testing.twin import FakeClock, measure_step_ms, twin_server


def _variation(clock: FakeClock, **kw: float) -> StepVariation:
    args = {
        "noise_pct": 0.0,
        "drift_pct_per_min": 0.0,
        "epoch": None,
        "time_scale": 1.0,
        "seed": 0,
        **kw,
    }
    return StepVariation(**args, clock=clock)  # type: ignore[arg-type]


def test_off_by_default_is_the_law_exactly() -> None:
    cfg = load_config({})
    assert cfg.step_noise_pct == 0.0 and cfg.step_drift_pct_per_min == 0.0
    v = _variation(FakeClock())
    assert not v.active and v.factor() == 1.0


def test_drift_is_linear_in_model_minutes_since_the_epoch() -> None:
    clock = FakeClock(1000.0)
    v = _variation(clock, drift_pct_per_min=1.0, time_scale=0.5)
    assert v.factor() == pytest.approx(1.0)
    clock.t += 30.0  # 30 wall seconds at scale 0.5 = 1 model minute
    assert v.factor() == pytest.approx(1.01)
    clock.t += 270.0  # 10 model minutes in all
    assert v.factor() == pytest.approx(1.10)


def test_a_shared_epoch_carries_the_drift_across_restarts() -> None:
    clock = FakeClock(10_000.0)
    restarted = _variation(clock, drift_pct_per_min=2.0, epoch=10_000.0 - 300.0)  # 5 min ago
    assert restarted.factor() == pytest.approx(1.10)


def test_noise_is_seeded_centred_and_as_wide_as_asked() -> None:
    draws = [_variation(FakeClock(), noise_pct=5.0, seed=7) for _ in range(2)]
    a = [draws[0].factor() for _ in range(20_000)]
    b = [draws[1].factor() for _ in range(20_000)]
    assert a == b  # same seed, same sequence
    assert statistics.fmean(a) == pytest.approx(1.0, abs=0.002)
    assert statistics.pstdev(a) == pytest.approx(0.05, rel=0.05)
    other = _variation(FakeClock(), noise_pct=5.0, seed=8)
    assert [other.factor() for _ in range(5)] != a[:5]


def test_bad_settings_are_refused_with_the_variable_named() -> None:
    for raw in ("nan", "inf", "-1", "fast"):
        with pytest.raises(TwinConfigError, match="DSV4_TWIN_STEP_NOISE_PCT"):
            load_config({"DSV4_TWIN_STEP_NOISE_PCT": raw})
    cfg = load_config({"DSV4_TWIN_STEP_DRIFT_PCT_PER_MIN": "0.5", "DSV4_TWIN_DRIFT_EPOCH": "123.5"})
    assert cfg.step_drift_pct_per_min == 0.5 and cfg.drift_epoch == 123.5


@pytest.mark.slow
def test_a_drifted_twin_steps_slower_by_the_drift_it_was_given() -> None:
    """A real decode twin whose drift epoch lies 10 model minutes back runs its steps 20 % slower
    than the same twin without drift, measured from the client's token arrivals."""
    scale = 0.2
    base = {"DSV4_TWIN_TIME_SCALE": str(scale), "DSV4_TWIN_HAZARDS": "off"}
    drifted = {
        **base,
        "DSV4_TWIN_STEP_DRIFT_PCT_PER_MIN": "2.0",
        "DSV4_TWIN_DRIFT_EPOCH": str(time.time() - 10 * 60 * scale),
    }
    steps = {}
    for name, env in (("plain", base), ("drifted", drifted)):
        with twin_server(
            [
                "--disaggregation-mode",
                "decode",
                "--disable-overlap-schedule",
                "--cuda-graph-bs-decode",
                "8",
                "16",
            ],
            env=env,
        ) as proc:
            steps[name] = asyncio.run(
                measure_step_ms(proc.url, 8, probe_tokens=40, time_scale=scale)
            )
    ratio = steps["drifted"] / steps["plain"]
    # 10 to ~10.5 model minutes of 2 %/min while measuring: 1.20-1.21; generous for a busy machine
    assert 1.12 <= ratio <= 1.32, steps


def test_each_start_draws_its_own_seeded_deploy_offset(tmp_path: Path) -> None:  # noqa: ANN001
    from dsv4ops.twin.perf import deploy_offset

    assert deploy_offset(0.0, 1, str(tmp_path / "unused")) == (1.0, 0)
    assert not (tmp_path / "unused").exists()  # off: nothing counted
    first = [deploy_offset(2.0, 5, str(tmp_path / "a"))[0] for _ in range(400)]
    again = [deploy_offset(2.0, 5, str(tmp_path / "b"))[0] for _ in range(400)]
    assert first == again  # the same sequence of starts draws the same offsets
    assert len(set(first)) == 400  # every start its own
    assert statistics.fmean(first) == pytest.approx(1.0, abs=0.003)
    assert statistics.pstdev(first) == pytest.approx(0.02, rel=0.15)
    assert deploy_offset(2.0, 6, str(tmp_path / "c"))[0] != first[0]  # another seed, another draw
    assert deploy_offset(2.0, 5, str(tmp_path / "a"))[1] == 400  # the 401st start
    v = StepVariation(
        noise_pct=0.0,
        drift_pct_per_min=0.0,
        epoch=None,
        time_scale=1.0,
        seed=0,
        clock=FakeClock(),
        offset=first[0],
    )
    assert v.active and v.factor() == first[0]


def test_deploy_variation_settings_are_read_and_checked() -> None:
    cfg = load_config(
        {
            "DSV4_TWIN_DEPLOY_VARIATION_PCT": "1.5",
            "DSV4_TWIN_DEPLOY_SEED": "3",
            "DSV4_TWIN_DEPLOY_COUNTER": "/tmp/x",
        }
    )
    assert (cfg.deploy_variation_pct, cfg.deploy_seed, cfg.deploy_counter) == (1.5, 3, "/tmp/x")
    assert load_config({}).deploy_variation_pct == 0.0 and load_config({}).deploy_seed is None
    with pytest.raises(TwinConfigError, match="DSV4_TWIN_DEPLOY_VARIATION_PCT"):
        load_config({"DSV4_TWIN_DEPLOY_VARIATION_PCT": "-2"})


@pytest.mark.slow
def test_a_restarted_twin_runs_its_step_law_times_that_starts_offset(tmp_path: Path) -> None:  # noqa: ANN001
    """A real decode twin with 20% deploy-to-deploy variation: its steps are the plain law times
    the offset its start drew (and logged), measured from the client's token arrivals."""
    from dsv4ops.twin.events import read_events
    from dsv4ops.twin.perf import deploy_offset

    scale = 0.2
    base = {"DSV4_TWIN_TIME_SCALE": str(scale), "DSV4_TWIN_HAZARDS": "off"}
    counter, log = tmp_path / "starts", tmp_path / "events.jsonl"
    varied = {
        **base,
        "DSV4_TWIN_DEPLOY_VARIATION_PCT": "20",
        "DSV4_TWIN_DEPLOY_SEED": "2",
        "DSV4_TWIN_DEPLOY_COUNTER": str(counter),
        "DSV4_TWIN_EVENT_LOG": str(log),
    }
    want = deploy_offset(20.0, 2, str(tmp_path / "predicted"))[0]  # start 0 of seed 2
    assert want > 1.2, want  # the seed is chosen so the offset is plain to see
    steps = {}
    for name, env in (("plain", base), ("varied", varied)):
        with twin_server(
            [
                "--disaggregation-mode",
                "decode",
                "--disable-overlap-schedule",
                "--cuda-graph-bs-decode",
                "8",
                "16",
            ],
            env=env,
        ) as proc:
            steps[name] = asyncio.run(
                measure_step_ms(proc.url, 8, probe_tokens=40, time_scale=scale)
            )
    (event,) = [e for e in read_events(str(log)) if e["event"] == "deploy_offset"]
    assert event["start"] == 0 and event["factor"] == pytest.approx(want, abs=1e-6)
    assert steps["varied"] / steps["plain"] == pytest.approx(want, rel=0.06), steps
