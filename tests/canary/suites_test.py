"""Suites against a small streaming server of our own (testing/programs/canary_server.py): the loadgen
mechanics, each detector and each verdict path, fast and without the twin."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsv4ops.canary import SuiteResult, Thresholds, Verdict, run_suite
from dsv4ops.errors import CanaryError
from dsv4ops.routerkind import RouterKind
from testing.canary import fake_server
from testing.ports import free_port

pytestmark = pytest.mark.slow

# These tests exercise the detectors and verdict paths; the self-check has its own tests
# (selfcheck_test.py, and the client-bound case below). Its loop-lag bound is loosened here because
# this pytest process is long-lived and shared: a CI run once saw one 285 ms stall (machine 31%
# busy) turn a clean abort cascade INCONCLUSIVE. The CPU bound stays at its default.
TH = Thresholds(
    smoke_requests=12,
    stress_concurrency=16,
    corruption_turns=2,
    consistency_prompts=4,
    abort_streams=12,
    first_token_deadline_s=5.0,
    hang_deadline_s=30.0,
    loop_lag_p99_max_ms=1000.0,
)


def _run(url: str, suite: str, **kw: Any) -> SuiteResult:
    return run_suite(suite, url, worker_urls=[url], thresholds=kw.pop("thresholds", TH), **kw)


@pytest.mark.serial  # measured latencies: alone (testing/workers.py)
def test_smoke_passes_and_measures(tmp_path: Path) -> None:
    lines: list[str] = []
    with fake_server({"a_ms": 4, "b_ms": 0.5}) as url:
        result = _run(url, "smoke", report_dir=tmp_path, progress=lines.append)
    assert result.verdict is Verdict.PASS, result.reasons
    s = result.metrics["summary"]
    assert s["completed"] == 12 and s["failed"] == 0
    # 4 streams: step = 4 + 0.5*4 = 6 ms per token. TPOT, not ITL: on a loaded machine several
    # tokens arrive in one read (ITL 0 then a double gap), which drags the ITL median down;
    # (e2e - ttft) / (tokens - 1) spans the whole stream and is immune. The fake's sleeps never
    # end early, and the smallest batch (1, at the tail) still steps 4.5 ms: the floor is hard.
    assert 0.9 * 6.0 <= s["median_tpot_ms"] < 30.0
    assert result.metrics["tool_calls"]["checked"] == 6
    assert lines and lines[0].startswith("smoke:")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "PASS" and report["completed"] == 12
    assert {"output_throughput", "median_ttft_ms", "p99_itl_ms"} <= report.keys()
    assert (tmp_path / "report.md").read_text().startswith("# Canary `smoke`: **PASS**")
    assert (tmp_path / "smoke-latency.png").stat().st_size > 1000


@pytest.mark.serial  # measured latencies: alone (testing/workers.py)
def test_mid_stream_stall_is_detected_within_3s_and_fails() -> None:
    th = Thresholds(smoke_requests=4, smoke_concurrency=4)
    with fake_server({"stall_after": 5}) as url:
        result = _run(url, "smoke", thresholds=th)
    assert result.verdict is Verdict.FAIL
    hangs = result.metrics["hangs"]
    assert hangs["hangs_by_kind"].get("stall", 0) >= 1
    stalls = [e for e in hangs["events"] if e["kind"] == "stall"]
    assert all(2.0 <= e["detection_latency_s"] < 3.0 for e in stalls)
    # each stalled stream is judged once, as a hang: the requests the watchdog cut are not
    # counted again as failed requests
    kinds = {(r.level, r.kind.value) for r in result.findings}
    assert ("FAIL", "hang") in kinds and ("FAIL", "errors") not in kinds, result.reasons


@pytest.mark.serial  # measured latencies: alone (testing/workers.py)
def test_sweep_fits_the_law_and_finds_the_bucket_drop() -> None:
    buckets = (4, 8, 16, 24)
    th = Thresholds(sweep_concurrency=(4, 8, 16, 17, 24), sweep_level_s=3.0, sweep_max_tokens=400)
    with fake_server({"a_ms": 10, "b_ms": 1.0, "buckets": list(buckets)}) as url:
        # no worker metrics: the law comes from the client's token timestamps
        result = run_suite("sweep", url, thresholds=th, buckets=buckets)
    assert result.metrics["law_source"] == "token timestamps"
    assert result.verdict is Verdict.PASS, result.reasons
    fit = result.metrics["fit"]["padded_bs"]
    # The fake's sleeps overshoot on a busy machine (they only stretch), and a and b trade off
    # along the fit's lever arm to bs 0: the step the law predicts at the padded batches it
    # measured is what is held tight; a and b only loosely (a broken fit is off by 2x or more).
    for bs in buckets:
        predicted = fit["a_ms"] + fit["b_ms"] * bs
        assert 0.95 * (10 + bs) <= predicted <= 1.25 * (10 + bs), (bs, fit)
    assert fit["b_ms"] == pytest.approx(1.0, rel=0.35)
    assert 8.0 <= fit["a_ms"] <= 16.0
    assert [(d["from_bs"], d["to_bs"]) for d in result.metrics["sawtooth"]] == [(16.0, 17.0)]
    # 400-token streams outlast the staircase: cut by the suite, which is not a failure, and
    # their tokens count, so the run's tok/s lies within the levels' (the drain runs at the top
    # level until the cut)
    s = result.metrics["summary"]
    assert s["failed"] == 0 and s["cancelled"] >= 16 and s["errors_by_kind"] == {}
    assert s["output_tokens_by_outcome"]["cancelled"] > s["output_tokens_by_outcome"]["completed"]
    level_tok_s = [p["output_tok_s"] for p in result.metrics["levels"]]
    assert 0.8 * min(level_tok_s) <= s["output_throughput"] <= 1.1 * max(level_tok_s), (
        s,
        level_tok_s,
    )
    assert any("cancelled (not failures" in r for r in result.reasons)


# Not serial: open-loop arrivals at 8/s of 16-token answers load nothing, and the rate is held
# only to 4-12 requests/s; the twin's soaks pass beside other workers too (twin_e2e_test.py).
def test_soak_with_open_loop_poisson_arrivals() -> None:
    th = Thresholds(soak_concurrency=4, max_tokens=16)
    with fake_server({"a_ms": 3}) as url:
        result = _run(url, "soak", thresholds=th, duration_s=6.0, rate_per_s=8.0)
    assert result.verdict is Verdict.PASS, result.reasons
    s = result.metrics["summary"]
    assert s["completed"] == 48
    assert 4.0 < s["request_throughput"] < 12.0


def test_a_server_that_never_sends_done_passes_and_is_reported(tmp_path: Path) -> None:
    """finish_reason + usage, then the body ends: complete answers, counted and said so."""
    with fake_server({"a_ms": 2, "no_done": True}) as url:
        result = _run(url, "smoke", report_dir=tmp_path)
    assert result.verdict is Verdict.PASS, result.reasons
    s = result.metrics["summary"]
    assert (s["completed"], s["failed"], s["completed_without_done"]) == (12, 0, 12)
    assert s["total_output_tokens"] > 0 and s["output_throughput"] > 0
    assert any(
        "12 of 12 streams ended after their finish_reason without data: [DONE]" in r
        for r in result.reasons
    ), result.reasons
    assert "without `data: [DONE]`" in (tmp_path / "report.md").read_text()


def test_http_errors_fail_smoke() -> None:
    with fake_server({"error_every": 3}) as url:
        result = _run(url, "smoke")
    assert result.verdict is Verdict.FAIL
    assert any("requests failed (http_status=4)" in r for r in result.reasons), result.reasons


@pytest.mark.parametrize(
    ("mode", "kind"), [("cross_talk", "cross_talk"), ("invalid_json", "invalid_json")]
)
def test_corrupted_tool_calls_fail_the_corruption_suite(mode: str, kind: str) -> None:
    with fake_server({"corrupt": mode}) as url:
        result = _run(url, "corruption")
    assert result.verdict is Verdict.FAIL
    assert any("tool-call corruption" in r and kind in r for r in result.reasons), result.reasons


def test_clean_corruption_suite_passes_with_consistency() -> None:
    with fake_server() as url:
        result = _run(url, "corruption")
    assert result.verdict is Verdict.PASS, result.reasons
    assert result.metrics["consistency"]["agreement"] == 1.0
    assert result.metrics["tool_calls"]["checked"] == 16 * 2 + 1  # and one stream pair
    assert result.metrics["stream_pairs"]["compared"] == 1


def test_a_corruption_run_where_no_request_succeeds_fails_on_the_errors_not_a_crash() -> None:
    """The decode killed: every request fails, so no consistency prompt was answered alone and
    under load. That compared nothing (an IndexError, exit 3, before): the failures are the
    FAIL, and the consistency is said to be unmeasured, never 0 %."""
    with fake_server({"error_every": 1}) as url:
        result = _run(url, "corruption")
    assert result.verdict is Verdict.FAIL, result.reasons
    assert any("requests failed (http_status=" in r for r in result.reasons), result.reasons
    assert any(
        "no consistency prompt completed both at concurrency 1 and under load" in r
        for r in result.reasons
    ), result.reasons
    assert result.metrics["consistency"]["agreement"] is None
    assert not any("output consistency" in r for r in result.reasons), result.reasons


def test_abort_cascade_recovers_or_detects_the_wedge() -> None:
    with fake_server({"a_ms": 10}) as url:
        ok = _run(url, "abort-cascade")
        aborts = httpx.get(url + "/_fake/aborts", timeout=5).json()
    assert ok.verdict is Verdict.PASS, ok.reasons
    cascade = ok.metrics["cascade"]
    assert cascade["recovery_s"] is not None
    # half by disconnect, half by per-request /abort_request, each of which ended its stream;
    # never abort_all, which on a real box would abort every user's request too
    assert cascade["aborted_by_disconnect"] == cascade["aborted_by_request"] == 6
    assert cascade["ended_by_abort_request"] == 6
    assert aborts and not any(a.get("abort_all") for a in aborts)
    assert len({a["rid"] for a in aborts}) == 6 and all("-cascade-" in a["rid"] for a in aborts)
    # the probes' numbers are per second of probing: their span, not a fixed 1 s (4 probes sent
    # together, so the span is the slowest one's E2E plus the send spread)
    s = ok.metrics["summary"]
    assert s["max_e2e_latency_ms"] / 1e3 <= s["duration"] <= s["max_e2e_latency_ms"] / 1e3 + 0.25
    assert s["request_throughput"] == pytest.approx(4 / s["duration"])
    assert s["completed"] == 4 and s["failed"] == s["cancelled"] == 0
    with fake_server({"a_ms": 10, "wedge_after_aborts": 3}) as url:
        wedged = _run(url, "abort-cascade")
    assert wedged.verdict is Verdict.FAIL
    assert wedged.metrics["cascade"]["wedge_detected_s"] < 3.0


@pytest.mark.parametrize(
    ("router", "server", "verdict", "said", "ids_sent"),
    [
        # SMG keeps a chat body's rid: the suite aborts by it alone, and says which id it used
        (RouterKind.SMG, {}, Verdict.PASS, "aborted by rid: what SMG 1.13.0 lets reach", 6),
        # a router recorded as keeping the rid that did not: reached by the chunk id too, named
        (RouterKind.SMG, {"rid_dropped": True}, Verdict.PASS, "unlike what dsv4ops records", 12),
        # rid dropped and no chunk id: nothing to send; cut by disconnect, never a PASS
        (
            RouterKind.SGLANG_ROUTER,
            {"rid_dropped": True, "no_chunk_id": True},
            Verdict.INCONCLUSIVE,
            "6 of 6 streams could not be aborted by request (cut by disconnect instead)",
            0,
        ),
    ],
)
def test_abort_cascade_aborts_by_the_id_the_router_lets_through(
    router: RouterKind, server: dict[str, Any], verdict: Verdict, said: str, ids_sent: int
) -> None:
    with fake_server({"a_ms": 10, **server}) as url:
        result = _run(url, "abort-cascade", router=router)
        aborts = httpx.get(url + "/_fake/aborts", timeout=5).json()
    assert result.verdict is verdict, result.reasons
    assert any(said in r for r in result.reasons), result.reasons
    cascade = result.metrics["cascade"]
    assert (
        cascade["ended_by_abort_request"]
        == cascade["aborted_by_request"]
        == 6 - (cascade["abort_unaddressed"])
    )
    assert cascade["recovery_s"] is not None  # the unaddressed ones were cut all the same
    assert len({a["rid"] for a in aborts}) == ids_sent


def test_abort_cascade_without_worker_metrics_is_inconclusive() -> None:
    with fake_server({"a_ms": 10}) as url:
        result = run_suite("abort-cascade", url, thresholds=TH)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any("metrics unavailable" in r for r in result.reasons)


def test_unreachable_endpoint_is_a_canary_error() -> None:
    with pytest.raises(CanaryError, match="cannot reach"):
        run_suite("smoke", f"http://127.0.0.1:{free_port()}", thresholds=TH)


def test_unknown_suite() -> None:
    with pytest.raises(CanaryError, match="unknown suite"):
        run_suite("nope", "http://127.0.0.1:1")


def test_a_client_bound_run_is_inconclusive_not_server_numbers() -> None:
    th = Thresholds(
        smoke_requests=4, smoke_concurrency=2, loop_lag_p99_max_ms=0.0, client_cpu_max=1.5
    )
    with fake_server() as url:
        result = _run(url, "smoke", thresholds=th)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert any("event-loop lag" in r for r in result.reasons)


def test_a_failed_request_line_always_says_which_request_and_what_failed() -> None:
    """The smoke FAIL's `first:` is never empty, also for an error with no detail (issue 23)."""
    from dsv4ops.canary.records import RequestRecord
    from dsv4ops.canary.suites.common import first_error

    bare = RequestRecord(rid="smoke-3", status=503, error="http_status", error_detail="")
    assert first_error(bare) == "smoke-3: http_status HTTP 503 (the server sent no detail)"
    cut = RequestRecord(rid="smoke-4", error="hang_stall", error_detail="no token for\n 3.0 s")
    assert first_error(cut) == "smoke-4: hang_stall: no token for 3.0 s"


def test_the_cli_fail_lines_count_calls_and_findings_apart_and_name_the_first_error() -> None:
    """Through `dsv4ops canary --url`, as the operator reads them (issue 23, item 7)."""
    import re
    import subprocess
    import sys

    def canary(url: str, suite: str) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "dsv4ops",
                "canary",
                "--url",
                url,
                "--suite",
                suite,
                "--model",
                "fake",
                "--worker-url",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr  # FAIL
        return proc.stdout + proc.stderr

    with fake_server({"error_every": 3}) as url:
        out = canary(url, "smoke")
    first = re.search(r"requests failed \(http_status=\d+\); first: (.*)", out)
    assert first and re.match(r"\S+: http_status HTTP 500: ", first.group(1)), out
    with fake_server({"corrupt": "cross_talk"}) as url:
        out = canary(url, "corruption")
    line = re.search(
        r"tool-call corruption in (\d+) of (\d+) calls: (\d+) findings? \(([^)]*)\)", out
    )
    assert line, out
    kinds = [int(v) for v in re.findall(r"=(\d+)", line.group(4))]
    assert sum(kinds) == int(line.group(3)) >= int(line.group(1))


def test_tool_calls_off_by_the_profile_sends_none_and_says_so() -> None:
    """canary.tool_calls false: smoke sends plain prompts only and notes it; corruption, all tool
    calls, cannot judge (INCONCLUSIVE, never a PASS without its checks)."""

    off = TH.model_copy(update={"tool_calls": False})
    with fake_server() as url:
        smoke = _run(url, "smoke", thresholds=off)
        corruption = _run(url, "corruption", thresholds=off)
    assert smoke.verdict is Verdict.PASS, smoke.reasons
    assert smoke.metrics["tool_calls"]["checked"] == 0
    assert smoke.metrics["summary"]["completed"] == 12
    assert (
        "note: tool-call checks off by the profile (canary.tool_calls: false): none was sent"
        in smoke.reasons
    )
    assert corruption.verdict is Verdict.INCONCLUSIVE
    assert corruption.reasons == [
        "INCONCLUSIVE: tool-call checks off by the profile "
        "(canary.tool_calls: false): none was sent"
    ]


# Not serial: the client's loop is stalled on purpose, and more load only stalls it more; no
# judge here can turn that into a FAIL (the fake server's answers are clean, no latency limits).
def test_a_stall_the_client_cannot_vouch_for_is_inconclusive_not_a_failed_request() -> None:
    """The client's loop stalls 1.5 s (a progress line that blocks it) while a stream is silent:
    the watchdog cuts the stream, and the hang judge cannot tell the server's silence from the
    client's own. The cut stream must not come back as a failed request: a FAIL built on the
    client's lag (issue 38's one-place rule: the hang is judged where hangs are judged)."""
    th = Thresholds(smoke_requests=4, smoke_concurrency=4)
    blocked: list[str] = []

    def blocking_progress(line: str) -> None:
        if "in flight" in line and not blocked:  # the first 1-second tick, streams under way
            blocked.append(line)
            time.sleep(1.5)

    with fake_server({"stall_after": 5}) as url:
        result = _run(url, "smoke", thresholds=th, progress=blocking_progress)
    assert blocked, "the progress ticker never ran"
    assert sum(result.metrics["hangs"]["hangs_by_kind"].values()) >= 1, result.reasons
    kinds = {(r.level, r.kind.value) for r in result.findings}
    assert result.verdict is Verdict.INCONCLUSIVE, result.reasons
    assert ("INCONCLUSIVE", "hang") in kinds and not any(lvl == "FAIL" for lvl, _ in kinds), kinds
