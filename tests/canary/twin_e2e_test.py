"""End to end: every suite against the twin behind the real sglang-router.

Hazards off → every suite passes; each forced hazard makes the right suite FAIL for the right
reason; the sweep recovers the twin's configured step law (18 ms + 1.05 ms/req) and finds the
56 → 57 drop with step-8 buckets. The twin runs at time scale 0.3 (model ms × 0.3 = wall ms); its
/metrics report model time, so the server-side law is compared unscaled, and the law fitted from
the client's token receipt times (wall ms) is divided by the scale. The client self-check runs at
its default CPU bound and a loop-lag bound that fits a shared 2-core machine (see TH).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsv4ops.canary import SuiteResult, Thresholds, Verdict, run_suite, thresholds_from_profile
from dsv4ops.canary.stats import steady_window
from dsv4ops.canary.suites import smoke
from dsv4ops.canary.verdict import Kind
from dsv4ops.metrics.prom import parse_text, server_gauges
from dsv4ops.profiles import load_profile
from dsv4ops.routerkind import RouterKind
from testing.twin import TwinStack, assemble_chat_stream, sse_events, twin_stack

pytestmark = [pytest.mark.slow, pytest.mark.router]
# serial: the tests that measure time (the step law and its sawtooth from the sweep's levels, a
# wedge caught within 3 s) run while no other worker runs a test (testing/workers.py). The
# others judge verdicts whose evidence is not a duration (a corrupted call, an unparsed one, a
# user's stream left whole, failed requests) and share the machine; their client self-check
# runs at the loose loop-lag bound of TH, measured beside other suites (see TH).
serial = pytest.mark.serial

STEP8 = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96)  # profile baseline "step8"
SAFE_DECODE = [
    "--enable-metrics",
    "--disable-overlap-schedule",
    "--max-running-requests",
    "96",
    "--cuda-graph-bs-decode",
    *map(str, STEP8),
    "--tool-call-parser",
    "deepseekv4",
    "--reasoning-parser",
    "deepseek-v4",
]
SCALE = 0.3
# The router probes each worker's /health as often as on the box, in model time (the profile's
# 10 s at scale 0.3: every 3 s), not at the test stacks' 1 s. On the decode a probe is a 1-token
# generation in the batch; at 1 s it came about once per decode log interval (40 steps of ~25 ms)
# and could stay in phase with the logged steps through a level (the sweep's batch is read from
# those logs). At 3 s a 4 s level's measured 70 % holds at most one probe.
BASELINE = load_profile(Path(__file__).parents[2] / "profiles" / "baseline.yaml")
BOX_HEALTH_CHECKS = [
    "--health-check-interval-secs",
    str(round(BASELINE.router.health_check.interval_secs * SCALE)),
]
BASE_ENV = {"DSV4_TWIN_TIME_SCALE": str(SCALE), "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "0"}
TH = Thresholds(
    smoke_requests=16,
    stress_concurrency=80,
    corruption_turns=3,
    abort_streams=32,
    sweep_concurrency=(32, 48, 56, 57, 64),
    # 4 s a level, not 2.5: the 56 -> 57 drop (8 %) is judged against the levels' slice CIs, and
    # a slice of a 2.5 s level holds ~20 decode steps of 57 tokens each, so one step more or less
    # in a slice is 5 % of its count: a loaded run once saw 57's CI at 631-697 and no sawtooth.
    # At 4 s (the default is 6) a slice holds ~31 steps (3 %), and a level has up to 3 of the
    # decode's own 40-step reports (their CI is used when there are 3).
    sweep_level_s=4.0,
    sweep_max_tokens=1024,
    soak_concurrency=16,
    stress_duration_s=6.0,
    first_token_deadline_s=5.0,
    hang_deadline_s=60.0,
    # The client CPU bound stays at its default (0.9 cores; the client peaks at ~0.4 here). The
    # loop-lag bound does not: twin, router and client share two cores, so the client's loop
    # waits for the CPU, not on its own work. Measured p99 on 2026-11-29: 19-37 ms with the
    # canary tests alone, 55-73 ms while other test suites ran on the machine (corruption and
    # abort-cascade then went INCONCLUSIVE at the 50 ms default); 300 ms is ~4x the worst seen
    # (a CI run of the fake-server tests once saw a single 285 ms stall in this long process).
    loop_lag_p99_max_ms=300.0,
)
# The client-side law (token gaps, wall ms / scale) vs the configured 18 ms + 1.05 ms/req, measured
# on this 2-core machine (twin + router + client on it) on 2026-11-29, 16 sweeps:
#   canary tests alone (8):            a -2.8 … +2.6 %,  b -0.8 … +1.9 %
#   other test suites also running (8): a -3.5 … +14.2 %, b -5.7 … +1.7 %
# Under outside load the twin's own steps really stretch (its loop is starved of CPU), so the
# client correctly measures a slower server, and the extrapolated intercept moves most: the
# levels are 32..64 (padded), so a and b trade off along the fit's lever arm to 0. A full run
# here (2026-12-02) saw a +39 % / b -15 % while the step the law predicts over the measured batches
# was within 4 % everywhere. So the client's law is held to the step it predicts where it was
# measured (CLIENT_STEP_REL), and a and b only loosely (a broken fit or a mixed clock is 2-20x).
CLIENT_STEP_REL = 0.08
# The server's law (the decode's own gen-throughput reports, one per 40 steps) has the same lever
# arm: CI of stop 29 saw a at 17.44 (-3.1 %) with b ~ +1 %, so every step it predicts over the
# measured batches was within 0.5 %. Held there at the 3 % (+1), a and b loosely.
SERVER_STEP_REL = 0.04
SERVER_LAW_REL_A = 0.15
SERVER_LAW_REL_B = 0.1
CLIENT_LAW_REL_A = 0.6
CLIENT_LAW_REL_B = 0.3
# long enough to outlast the whole abort-cascade suite at batch 1 (5.7 ms wall a step)
USER_TOKENS = 600
# The tests whose corruption suite must FAIL for a forced hazard (or a missing parser) run 16
# sessions, not TH's 80: the verdict and its reason are what they check, and 80 sessions kept
# the twin and router busy ~7 s a run (~11 s on CI's loaded cores). A forced `corrupt` still
# corrupts a request only at the twin's corrupt_prob (0.05: at 16 sessions x 3 turns, no
# corruption at all ~8 % of runs), so those twins corrupt at 0.3: P(none in 48 requests) =
# 0.7**48 ~ 4e-8, below the 0.95**250 ~ 3e-6 of 80 sessions at 0.05.
FAIL_SESSIONS = 16
FAIL_CORRUPT_PROB = "0.3"


def _run(stack: TwinStack, suite: str, **kw: Any) -> SuiteResult:
    return run_suite(
        suite,
        stack.router_url,
        worker_urls=[stack.prefill.url, stack.decode.url],
        thresholds=TH,
        buckets=STEP8,
        **kw,
    )


def _hazard(stack: TwinStack, name: str, state: str, **extra: object) -> None:
    for url in (stack.prefill.url, stack.decode.url):
        httpx.post(
            url + "/_twin/hazard", json={"hazard": name, "state": state, **extra}, timeout=5
        ).raise_for_status()


@pytest.fixture(scope="module")
def safe_stack() -> Iterator[TwinStack]:
    with twin_stack(
        router=True,
        # corrupt_prob counts only while a test forces `corrupt` (FAIL_CORRUPT_PROB)
        env={**BASE_ENV, "DSV4_TWIN_HAZARDS": "off", "DSV4_TWIN_CORRUPT_PROB": FAIL_CORRUPT_PROB},
        prefill_args=["--enable-metrics"],
        decode_args=SAFE_DECODE,
        router_args=BOX_HEALTH_CHECKS,
    ) as stack:
        yield stack


# Not serial: these suites' verdicts rest on errors, hangs, tool calls and a wedge, not on a
# duration the other workers' load would stretch; they share the machine at TH's loose loop-lag
# bound. The sweep's law and sawtooth are measured alone (below).
@pytest.mark.parametrize("suite", ["smoke", "corruption", "soak", "abort-cascade"])
def test_hazards_off_every_other_suite_passes(safe_stack: TwinStack, suite: str) -> None:
    result = _run(safe_stack, suite)
    assert result.verdict is Verdict.PASS, result.reasons
    if suite == "corruption":
        assert result.metrics["tool_calls"]["checked"] >= 80 * TH.corruption_turns
        assert result.metrics["consistency"]["agreement"] == 1.0


@serial
def test_hazards_off_the_sweep_recovers_the_law(safe_stack: TwinStack, tmp_path: Path) -> None:
    result = _run(safe_stack, "sweep", report_dir=tmp_path)
    assert result.verdict is Verdict.PASS, result.reasons
    sweep = result.metrics
    law = sweep["fit"]["metrics"]  # the server's own accounting (the twin computes it)
    for bs in (32, 48, 64):  # the padded batches the sweep measured (STEP8 buckets)
        predicted = law["a_ms"] + law["b_ms"] * bs
        assert predicted == pytest.approx(18.0 + 1.05 * bs, rel=SERVER_STEP_REL), (bs, law)
    assert law["a_ms"] == pytest.approx(18.0, rel=SERVER_LAW_REL_A), law
    assert law["b_ms"] == pytest.approx(1.05, rel=SERVER_LAW_REL_B), law
    # ...and independently from the client's receipt timestamps, so the check does not read the
    # twin's formula back to itself; on the same clock as the server's (model time, the twin's
    # scale from its /server_info: issue 23)
    client_law = sweep["fit"]["padded_bs"]
    assert sweep["clock"]["time_scale"] == SCALE and client_law["clock"] == law["clock"]
    for bs in (32, 48, 64):  # the padded batches the sweep measured (STEP8 buckets)
        predicted = client_law["a_ms"] + client_law["b_ms"] * bs
        assert predicted == pytest.approx(18.0 + 1.05 * bs, rel=CLIENT_STEP_REL), (bs, client_law)
    assert client_law["a_ms"] == pytest.approx(18.0, rel=CLIENT_LAW_REL_A), client_law
    assert client_law["b_ms"] == pytest.approx(1.05, rel=CLIENT_LAW_REL_B), client_law
    assert [(d["from_bs"], d["to_bs"]) for d in sweep["sawtooth"]] == [(56.0, 57.0)], [
        (p["bs"], p["output_tok_s_metrics"], p["output_tok_s_ci"], p["output_tok_s_n"])
        for p in sweep["levels"]
    ]
    assert (tmp_path / "report.json").exists() and (tmp_path / "sweep-sweep.png").exists()


@serial
def test_sweep_report_counts_its_own_cancellations_apart_and_every_token(
    safe_stack: TwinStack, tmp_path: Path
) -> None:
    """Issue 11 item 7: the sweep's deliberate cuts at the end are not failures, and the report's
    bench_serving keys count every token received, so output_throughput lies within the levels'."""
    th = TH.model_copy(
        update={"sweep_concurrency": (16, 32, 48), "sweep_level_s": 2.0, "sweep_max_tokens": 512}
    )
    # 512 tokens take ~10 s of wall time at c48 (scale 0.3), far longer than the 3 s drain: the
    # last level's streams are cut by the suite, while c16's first streams (10-20 ms a step)
    # complete before the drain ends
    result = run_suite(
        "sweep",
        safe_stack.router_url,
        worker_urls=[safe_stack.prefill.url, safe_stack.decode.url],
        thresholds=th,
        buckets=STEP8,
        report_dir=tmp_path,
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["failed"] == 0 and report["errors_by_kind"] == {}, report["errors_by_kind"]
    assert report["cancelled"] >= 8 and report["completed"] >= 8
    by = report["output_tokens_by_outcome"]
    assert report["total_output_tokens"] == by["completed"] + by["cancelled"] + by["failed"]
    assert by["cancelled"] > 0
    assert report["output_throughput"] == pytest.approx(
        report["total_output_tokens"] / report["duration"]
    )
    assert report["request_throughput"] == pytest.approx(report["completed"] / report["duration"])
    # the levels are model time (issue 23), bench_serving's keys the client's wall clock
    level_tok_s = [p["output_tok_s"] / SCALE for p in result.metrics["levels"]]
    assert len(level_tok_s) == 3 and result.metrics["summary_clock"] == "client wall"
    assert (
        0.8 * min(level_tok_s) <= report["output_throughput"] <= 1.1 * max(level_tok_s)
    ), level_tok_s
    assert "| completed | cancelled | failed |" in (tmp_path / "report.md").read_text()
    assert report["summary_suite"] == "sweep"


@serial
def test_overlap_scheduler_abort_cascade_wedge_detected_within_3s() -> None:
    overlap_on = [a for a in SAFE_DECODE if a != "--disable-overlap-schedule"]
    with twin_stack(
        router=True, env=BASE_ENV, prefill_args=["--enable-metrics"], decode_args=overlap_on
    ) as stack:
        result = _run(stack, "abort-cascade")
        # what the canary saw: 0.5.23's frozen gauges (rank 0 blocked), not a zero throughput
        frozen = server_gauges(parse_text(httpx.get(stack.decode.url + "/metrics").text))
        assert (frozen.running or 0) > 0 and (frozen.gen_throughput or 0) > 0, frozen
    assert result.verdict is Verdict.FAIL
    assert any(r.startswith("FAIL: wedge") for r in result.reasons), result.reasons
    assert result.metrics["cascade"]["wedge_detected_s"] < 3.0


# Each box shape of the multi-stream-overlap race, forced (at the default 5 % of requests), and
# the reason the suite must give for it. The stack's parser is deepseekv4, served through
# deepseek-recipe on 0.5.23: a malformed invoke is streamed as decoded, not dropped.
SHAPE_REASONS = {
    "dropped_call": "invalid_json",
    "cross_talk": "cross_talk",
    "dsml_in_content": "markup_in_content",
}


@pytest.mark.parametrize("shape", SHAPE_REASONS)
def test_each_forced_corruption_shape_fails_the_corruption_suite_for_its_reason(
    safe_stack: TwinStack, shape: str
) -> None:
    _hazard(safe_stack, "corrupt", "force", shapes=[shape])
    try:
        result = _run(safe_stack, "corruption", concurrency=FAIL_SESSIONS)
    finally:
        _hazard(safe_stack, "corrupt", "off")
    assert result.verdict is Verdict.FAIL
    reason = SHAPE_REASONS[shape]
    assert any("tool-call corruption" in r and reason in r for r in result.reasons), result.reasons
    others = [k for k in SHAPE_REASONS.values() if k != reason] + ["no tool calls"]
    assert not any(k in r for r in result.reasons for k in others), result.reasons
    logged = {e.get("shape") for e in safe_stack.events() if e["event"] == "corrupted"}
    assert shape in logged


def test_a_detector_drops_the_malformed_invoke_and_the_suite_fails_for_the_missing_call() -> None:
    # any parser the recipe does not serve (here qwen) keeps the detector's fail-closed drop
    detector = [a if a != "deepseekv4" else "qwen" for a in SAFE_DECODE]
    env = {
        **BASE_ENV,
        "DSV4_TWIN_FORCE": "corrupt",
        "DSV4_TWIN_CORRUPT_SHAPES": "dropped_call",
        "DSV4_TWIN_CORRUPT_PROB": FAIL_CORRUPT_PROB,
    }
    with twin_stack(
        router=True, env=env, prefill_args=["--enable-metrics"], decode_args=detector
    ) as stack:
        result = _run(stack, "corruption", concurrency=FAIL_SESSIONS)
        logged = {e.get("shape") for e in stack.events() if e["event"] == "corrupted"}
    assert result.verdict is Verdict.FAIL
    assert any(
        "tool-call corruption" in r and "missing_tool_call" in r for r in result.reasons
    ), result.reasons
    assert not any("invalid_json" in r for r in result.reasons), result.reasons
    assert logged == {"dropped_call"}


def test_tiny_cpus_tolerance_still_fails_a_unit_that_corrupts_its_calls() -> None:
    """`tiny-cpu` tolerates a quarter of bad calls (`corruption_max_rate: 0.25`: its tiny tool
    model misses about 1 call in 400 on a healthy unit, docs/canary.md): a twin that corrupts
    every tool call (the corrupt hazard forced on every request) still FAILs its corruption suite,
    judged by tiny-cpu's own thresholds (4 sessions), for the calls."""
    th = thresholds_from_profile(load_profile("tiny-cpu"))
    assert (th.corruption_max_rate, th.stress_concurrency) == (0.25, 4)
    env = {**BASE_ENV, "DSV4_TWIN_FORCE": "corrupt", "DSV4_TWIN_CORRUPT_PROB": "1"}
    with twin_stack(
        router=True, env=env, prefill_args=["--enable-metrics"], decode_args=SAFE_DECODE
    ) as stack:
        result = run_suite(
            "corruption",
            stack.router_url,
            worker_urls=[stack.prefill.url, stack.decode.url],
            thresholds=th,
            buckets=STEP8,
        )
    assert result.verdict is Verdict.FAIL, result.reasons
    # every call bad: corruption, or (every call dropped) no call at all; never a pass
    failed = {r.kind for r in result.findings if r.level == "FAIL"}
    assert failed & {Kind.TOOL_CORRUPTION, Kind.NO_TOOL_CALLS}, result.reasons


def test_thinking_mode_passes_and_its_reasoning_is_seen(safe_stack: TwinStack) -> None:
    body = {
        "model": "default",
        "messages": [{"role": "user", "content": "think first"}],
        "max_tokens": 40,
        "stream": True,
        "chat_template_kwargs": {"thinking": True},
    }
    with httpx.stream(
        "POST", safe_stack.router_url + "/v1/chat/completions", json=body, timeout=30
    ) as resp:
        events = sse_events(resp.iter_lines())
    assert any(
        e["choices"] and e["choices"][0]["delta"].get("reasoning_content") for e in events[:-1]
    )
    th = TH.model_copy(
        update={"thinking": True, "thinking_budget_tokens": 64, "stress_concurrency": 16}
    )
    result = run_suite(
        "corruption",
        safe_stack.router_url,
        worker_urls=[safe_stack.prefill.url, safe_stack.decode.url],
        thresholds=th,
        buckets=STEP8,
    )
    assert result.verdict is Verdict.PASS, result.reasons
    assert result.metrics["tool_calls"]["checked"] >= 16 * TH.corruption_turns


# The decode's fastest step in wall seconds (a batch of 1: the law's 18 + 1.05 ms, overlap off)
MIN_STEP_WALL_S = (18.0 + 1.05) / 1000.0 * SCALE


def test_the_twin_drains_with_a_real_tail_and_the_soak_leaves_it_out(
    safe_stack: TwinStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38 item 5: when a load's arrivals stop, the twin's requests in flight decode their
    remaining tokens at the step law's time, as 0.5.23 does (the real CPU server took ~8 s), never
    at once; and the soak judges its decay inside the steady window only, the measured tail left
    out (a fixed 1-s drop once judged the real server's tail a decay: a false FAIL).

    Open-loop arrivals (seeded), so the streams in flight when the last one arrives hold every
    share of their tokens still to come, and the tail slopes over seconds as on the real server;
    a closed loop on the twin keeps its equal-length streams in phase, and its tail is a cliff of
    under a second (docs/twin.md, Known differences)."""
    seen: dict[str, Any] = {}

    def spy(records: Any, t0_ns: int, concurrency: int, *, open_loop: bool = False) -> Any:
        seen.update(records=list(records), t0_ns=t0_ns)
        return steady_window(records, t0_ns, concurrency, open_loop=open_loop)

    monkeypatch.setattr(smoke, "steady_window", spy)
    max_tokens = 300  # ~3 s a stream at ~24 running (43 ms a step, x0.3): the tail's length
    th = TH.model_copy(update={"soak_concurrency": 24, "max_tokens": max_tokens})
    result = run_suite(
        "soak",
        safe_stack.router_url,
        worker_urls=[safe_stack.prefill.url, safe_stack.decode.url],
        thresholds=th,
        buckets=STEP8,
        duration_s=5.0,
        rate_per_s=8.0,
    )
    assert result.verdict is Verdict.PASS, result.reasons
    records, t0 = seen["records"], seen["t0_ns"]
    last_send = max(r.t_send for r in records)
    # every stream in flight when arrivals stopped ran its remaining tokens at a step at least
    # the law's fastest (the twin catches up on a late step, never by more than 0.25 s)
    left = {}
    for r in records:
        if r.t_end > last_send:
            k = sum(1 for t in r.token_times if t > last_send)
            left[r.rid] = k
            assert (r.t_end - last_send) / 1e9 >= 0.8 * (k - 1) * MIN_STEP_WALL_S - 0.25, (r, k)
    assert max(left.values()) >= max_tokens // 2, left  # a stream with most of its tokens to come
    tail_s = (max(r.t_end for r in records) - last_send) / 1e9
    assert tail_s >= 0.8 * (max_tokens // 2) * MIN_STEP_WALL_S, tail_s
    # the soak's window ends at the second of the last arrival: the whole measured tail, seconds
    # of it (more than the fixed 1 s that judged the real tail a decay), is left out
    window = result.metrics["steady_window"]
    every = result.metrics["summary"]["output_tokens_per_s_buckets"]
    assert window["ramp_s"] + window["seconds"] == (last_send - t0) // 1_000_000_000, window
    assert window["ramp_s"] + window["seconds"] + window["drain_s"] == len(every), (window, every)
    assert window["drain_s"] >= 2, (window, every, tail_s)


def test_a_server_without_a_tool_call_parser_is_told_apart_from_corruption() -> None:
    no_parser = [a for a in SAFE_DECODE if a not in ("--tool-call-parser", "deepseekv4")]
    with twin_stack(
        router=True,
        env={**BASE_ENV, "DSV4_TWIN_HAZARDS": "off"},
        prefill_args=["--enable-metrics"],
        decode_args=no_parser,
    ) as stack:
        result = _run(stack, "corruption", concurrency=FAIL_SESSIONS)
    assert result.verdict is Verdict.FAIL
    assert any(
        "no tool calls in any of" in r and "parser" in r for r in result.reasons
    ), result.reasons
    assert not any("tool-call corruption" in r for r in result.reasons)


def test_abort_cascade_aborts_only_the_canary_streams_not_a_users(safe_stack: TwinStack) -> None:
    """A user's stream in flight through the same router survives the cascade untouched."""
    body = {
        "model": "default",
        "messages": [{"role": "user", "content": "a user's long answer"}],
        "max_tokens": USER_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with (
        httpx.Client(timeout=60) as client,
        ThreadPoolExecutor(1) as pool,
        client.stream("POST", safe_stack.router_url + "/v1/chat/completions", json=body) as resp,
    ):
        lines = resp.iter_lines()
        first = json.loads(next(ln for ln in lines if ln.startswith("data:"))[5:])
        state = client.get(safe_stack.decode.url + "/_twin/state").json()
        assert first["id"] in state["inflight_rids"]  # decoding before the canary starts
        user = pool.submit(lambda: sse_events(lines))
        # the router named, as a deployment does: the cascade aborts by what 0.3.2 lets through
        result = _run(safe_stack, "abort-cascade", router=RouterKind.SGLANG_ROUTER)
        still_running = not user.done()  # so it was in flight through the whole cascade
        events = user.result(timeout=30)
    assert result.verdict is Verdict.PASS, result.reasons
    cascade = result.metrics["cascade"]
    assert cascade["aborted_by_request"] == 16 and cascade["ended_by_abort_request"] == 16
    # 0.3.2 drops a chat body's rid: each stream aborted by the decode's own chunk id alone
    assert cascade["abort_by"] == "chunk id" and cascade["abort_request_ids"] == 16
    assert not any("unlike what dsv4ops records" in r for r in result.reasons), result.reasons
    assert still_running
    user_stream = assemble_chat_stream(events)
    assert user_stream["finish"] == "length" and events[-1] == "[DONE]"
    assert events[-2]["usage"]["completion_tokens"] == USER_TOKENS


def test_bootstrap_degradation_fails_the_smoke_canary() -> None:
    env = {
        **BASE_ENV,
        "DSV4_TWIN_FORCE": "degrade",
        "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "0.5",
        "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "10",
    }
    with twin_stack(
        router=True, env=env, prefill_args=["--enable-metrics"], decode_args=SAFE_DECODE
    ) as stack:
        result = _run(stack, "smoke")
    assert result.verdict is Verdict.FAIL
    assert any("requests failed" in r or "hang:" in r for r in result.reasons), result.reasons
