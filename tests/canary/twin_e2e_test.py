"""End to end: every suite against the twin behind the real sglang-router.

Hazards off → every suite passes; each forced hazard makes the right suite FAIL for the right
reason; the sweep recovers the twin's configured step law (18 ms + 1.05 ms/req) within 3% and
finds the 56 → 57 drop with step-8 buckets. The twin runs at time scale 0.3 (model ms × 0.3 =
wall ms); its /metrics report model time, so the server-side law is compared unscaled.
Loop-lag limits are relaxed: twin, router and client share this machine's two cores.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from dsv4ops.canary import Thresholds, Verdict, run_suite
from testing.twin_stack import TwinStack, twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]

STEP8 = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96)  # profile baseline "step8"
SAFE_DECODE = ["--enable-metrics", "--disable-overlap-schedule", "--max-running-requests", "96",
               "--cuda-graph-bs-decode", *map(str, STEP8)]
BASE_ENV = {"DSV4_TWIN_TIME_SCALE": "0.3", "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0"}
TH = Thresholds(
    smoke_requests=16, stress_concurrency=80, corruption_turns=3, abort_streams=32,
    sweep_concurrency=(32, 48, 56, 57, 64), sweep_level_s=2.5, sweep_max_tokens=1024,
    soak_concurrency=16, stress_duration_s=6.0, first_token_deadline_s=5.0, hang_deadline_s=60.0,
    loop_lag_p99_max_ms=1000.0, client_cpu_max=1.5,
)


def _run(stack: TwinStack, suite: str, **kw: object):  # type: ignore[no-untyped-def]
    return run_suite(suite, stack.router.url, worker_urls=[stack.prefill.url, stack.decode.url],
                     thresholds=TH, buckets=STEP8, **kw)


def _hazard(stack: TwinStack, name: str, state: str) -> None:
    for url in (stack.prefill.url, stack.decode.url):
        httpx.post(url + "/_twin/hazard", json={"hazard": name, "state": state}, timeout=5).raise_for_status()


@pytest.fixture(scope="module")
def safe_stack() -> Iterator[TwinStack]:
    with twin_stack(router=True, env={**BASE_ENV, "DSV4_TWIN_HAZARDS": "off"},
                    prefill_args=["--enable-metrics"], decode_args=SAFE_DECODE) as stack:
        yield stack


def test_hazards_off_every_suite_passes_and_the_sweep_recovers_the_law(safe_stack: TwinStack, tmp_path) -> None:
    result = _run(safe_stack, "all", report_dir=tmp_path)
    verdicts = {r.suite: r.verdict for r in result.sub_results}
    assert verdicts == dict.fromkeys(("smoke", "corruption", "sweep", "soak", "abort-cascade"), Verdict.PASS), result.reasons
    sweep = next(r for r in result.sub_results if r.suite == "sweep").metrics
    law = sweep["fit"]["metrics"]
    assert law["a_ms"] == pytest.approx(18.0, rel=0.03)
    assert law["b_ms"] == pytest.approx(1.05, rel=0.03)
    assert [(d["from_bs"], d["to_bs"]) for d in sweep["sawtooth"]] == [(56.0, 57.0)]
    corruption = next(r for r in result.sub_results if r.suite == "corruption").metrics
    assert corruption["tool_calls"]["checked"] >= 80 * TH.corruption_turns
    assert corruption["consistency"]["agreement"] == 1.0
    assert (tmp_path / "report.json").exists() and (tmp_path / "sweep-sweep.png").exists()


def test_forced_multi_stream_corruption_fails_the_corruption_suite(safe_stack: TwinStack) -> None:
    _hazard(safe_stack, "corrupt", "force")
    try:
        result = _run(safe_stack, "corruption")
    finally:
        _hazard(safe_stack, "corrupt", "off")
    assert result.verdict is Verdict.FAIL
    assert any("tool-call corruption" in r and ("cross_talk" in r or "invalid_json" in r)
               for r in result.reasons), result.reasons


def test_overlap_scheduler_abort_cascade_wedge_detected_within_3s() -> None:
    overlap_on = [a for a in SAFE_DECODE if a != "--disable-overlap-schedule"]
    with twin_stack(router=True, env=BASE_ENV, prefill_args=["--enable-metrics"],
                    decode_args=overlap_on) as stack:
        result = _run(stack, "abort-cascade")
    assert result.verdict is Verdict.FAIL
    assert any(r.startswith("FAIL: wedge") for r in result.reasons), result.reasons
    assert result.metrics["cascade"]["wedge_detected_s"] < 3.0


def test_bootstrap_degradation_fails_the_smoke_canary() -> None:
    env = {**BASE_ENV, "DSV4_TWIN_FORCE": "degrade", "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "0.5",
           "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "10"}
    with twin_stack(router=True, env=env, prefill_args=["--enable-metrics"], decode_args=SAFE_DECODE) as stack:
        result = _run(stack, "smoke")
    assert result.verdict is Verdict.FAIL
    assert any("requests failed" in r or "hang:" in r for r in result.reasons), result.reasons
