from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from dsv4ops.canary import suites_for_change, thresholds_from_profile
from dsv4ops.canary.verdict import (
    LAG_ENV,
    Findings,
    Kind,
    Thresholds,
    Verdict,
    buckets_from_profile,
    worst,
)
from dsv4ops.deployment import Deployment
from dsv4ops.errors import CanaryError, DsOpsError
from dsv4ops.profiles import load_profile, render
from dsv4ops.settings import CanaryThresholds
from testing.orchestrate import make_deployment, with_recorded

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _p(name: str):  # type: ignore[no-untyped-def]
    return load_profile(str(PROFILES / f"{name}.yaml"))


def test_exit_codes_and_worst() -> None:
    assert [v.exit_code for v in Verdict] == [0, 2, 4]
    assert worst([Verdict.PASS, Verdict.INCONCLUSIVE]) is Verdict.INCONCLUSIVE
    assert worst([Verdict.INCONCLUSIVE, Verdict.FAIL, Verdict.PASS]) is Verdict.FAIL
    assert worst([]) is Verdict.INCONCLUSIVE


def test_findings_fail_beats_inconclusive_and_reasons_are_labelled() -> None:
    f = Findings()
    f.unsure("client-bound", Kind.CLIENT_CPU)
    f.note("42 requests")
    assert f.result("x", {}).verdict is Verdict.INCONCLUSIVE
    f.fail("cross_talk", Kind.TOOL_CORRUPTION)
    r = f.result("x", {})
    assert r.verdict is Verdict.FAIL
    assert r.reasons == ["FAIL: cross_talk", "INCONCLUSIVE: client-bound", "note: 42 requests"]
    # each reason typed, in the same order: what a reader acts on (issue 38), never the words
    assert r.to_json()["findings"] == [
        {"level": "FAIL", "kind": "tool_corruption", "reason": "FAIL: cross_talk"},
        {"level": "INCONCLUSIVE", "kind": "client_cpu", "reason": "INCONCLUSIVE: client-bound"},
        {"level": "note", "kind": "note", "reason": "note: 42 requests"},
    ]


def test_thresholds_and_buckets_from_the_real_profiles() -> None:
    baseline = _p("baseline")
    th = thresholds_from_profile(baseline)
    assert th.stress_concurrency == 80 and th.sweep_concurrency[:4] == (32, 48, 56, 57)
    assert th.stall_s == Thresholds().stall_s  # canary-side default kept
    assert buckets_from_profile(baseline)[-4:] == (72, 80, 88, 96)


def _flags(name: str) -> Deployment:
    """The profile's rendered deployment, whose recorded flags a deploy compares."""
    return render(_p(name))


def test_suites_for_change_with_real_profiles() -> None:
    base = _flags("baseline")
    assert suites_for_change(None, base) == ["smoke"]
    assert suites_for_change(base, base) == ["smoke"]
    assert suites_for_change(base, _flags("overlap-on")) == ["smoke", "abort-cascade"]
    assert suites_for_change(base, _flags("buckets-step4")) == ["smoke", "sweep"]
    assert suites_for_change(base, _flags("multi-stream-on")) == ["smoke", "corruption"]


def _recorded(flags: dict[str, object], kernel_package: str | None = None) -> Deployment:
    return replace(with_recorded(make_deployment("d"), flags=flags), kernel_package=kernel_package)


def test_suites_for_change_with_recorded_flags_and_kernel_packages() -> None:
    old = {"overlap_schedule": False, "multi_stream_overlap": False, "decode_buckets": [8, 16]}
    new = _recorded({**old, "decode_buckets": [8, 16, 24]}, "dsv4-decode@1.2.0")
    assert suites_for_change(_recorded(old), new) == ["smoke", "corruption", "sweep"]
    # the DSV4 decode graph width follows its context length (sglang#40442); a record from
    # before it was kept (no key) reads as the model default, as an unset one does
    ctx = {**old, "decode_context_length": 131072}
    assert suites_for_change(_recorded(old), _recorded(ctx)) == ["smoke", "sweep"]
    unset = _recorded({**old, "decode_context_length": None})
    assert suites_for_change(_recorded(old), unset) == ["smoke"]
    assert suites_for_change(_recorded(ctx), _recorded(ctx)) == ["smoke"]


def test_a_flag_a_record_predates_counts_as_changed_and_runs_its_suite() -> None:
    """docs/canary.md: a flag recorded before it existed is not known, so its suite runs once."""
    now = {"overlap_schedule": False, "multi_stream_overlap": False, "decode_buckets": [8, 16]}
    before = {k: v for k, v in now.items() if k != "overlap_schedule"}
    assert suites_for_change(_recorded(before), _recorded(now)) == ["smoke", "abort-cascade"]


def test_the_toggles_table_names_the_suite_a_change_of_each_toggle_runs() -> None:
    """docs/profiles.md's toggles table ("a change gates with") is the gate's own choice: a
    deploy that changes only that toggle's flag runs smoke and that suite."""
    from dsv4ops.profiles.profile_spec import SWITCHES
    from dsv4ops.profiles.toggles import TOGGLES, gate_suite

    base: dict[str, object] = {flag: False for flag, _ in SWITCHES} | {"decode_buckets": [8, 16]}
    for name, key in TOGGLES.items():
        changed = {**base, key: [8, 16, 24] if key == "decode_buckets" else True}
        runs = suites_for_change(_recorded(base), _recorded(changed))
        assert runs == ["smoke"] + ([] if gate_suite(name) == "smoke" else [gate_suite(name)])


def test_profile_watchdog_settings_reach_the_canary(tmp_path: Path) -> None:
    """stall_s / freeze_s set in a profile's canary section drive the hang watchdog."""
    from dsv4ops.canary.verdict import thresholds_from_profile
    from dsv4ops.profiles import load_profile

    src = load_profile("baseline").path
    text = (
        Path(src)
        .read_text()
        .replace(
            "  sawtooth_max_drop_pct: 5.0",
            "  sawtooth_max_drop_pct: 5.0\n  stall_s: 1.5\n  freeze_s: 2.5",
        )
    )
    assert "stall_s: 1.5" in text
    path = tmp_path / "tuned.yaml"
    path.write_text(text)
    th = thresholds_from_profile(load_profile(str(path)))
    assert (th.stall_s, th.freeze_s) == (1.5, 2.5)
    assert thresholds_from_profile(load_profile("baseline")).stall_s == 2.0


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        (
            {"first_token_deadline_s": "***"},
            "first_token_deadline_s='***': expected a number from 0 to 3600",
        ),
        ({"max_tokens": 1.5}, "max_tokens=1.5: expected an integer"),
        ({"max_tokens": True}, "max_tokens=True: expected an integer"),
        ({"thinking": 1}, "thinking=1: expected true or false"),
        (
            {"sweep_concurrency": [8, "x"]},
            "sweep_concurrency=[8, 'x']: expected a list of integers",
        ),
        ({"sweep_concurrency": [8, 0]}, "sweep_concurrency=[8, 0]: expected a list of integers"),
        ({"freeze_s": 0.01}, "freeze_s=0.01: expected a number from 0.1 to 600"),
        ({"freeze_s": math.inf}, "freeze_s=inf: expected a number from 0.1 to 600"),
        ({"ttft_p99_max_ms": "fast"}, "ttft_p99_max_ms='fast': expected a number (or null)"),
        ({"bogus": 3}, "bogus=3: no such threshold"),
    ],
)
def test_an_override_the_model_refuses_is_an_error_naming_key_value_and_what_it_takes(
    changes: dict[str, object], shown: str
) -> None:
    """An A/B's workload override that fits no threshold is refused, never dropped: the model
    validates it (types, bounds, strictness) and the error says it in the profile loader's words."""
    with pytest.raises(DsOpsError) as info:
        Thresholds().with_overrides(stall_s=1.5, **changes)
    assert f"canary override {shown}" in str(info.value)
    assert info.value.hint
    assert info.value.exit_code == 1


def test_overrides_of_the_right_type_apply_and_none_is_no_override() -> None:
    th = Thresholds().with_overrides(stall_s=2, max_tokens=32, sweep_concurrency=[8, 16])
    assert (th.stall_s, th.max_tokens, th.sweep_concurrency) == (2.0, 32, (8, 16))
    assert isinstance(th.stall_s, float)
    assert Thresholds().with_overrides(max_tokens=None) == Thresholds()
    assert Thresholds().with_overrides(ttft_p99_max_ms=250).ttft_p99_max_ms == 250.0


def test_a_recorded_value_outside_today_s_bounds_is_judged_by_and_survives_an_override() -> None:
    """A journal's canary section read as recorded (a stall_s below today's 0.1 s floor: the
    deployment ran with it) becomes the thresholds that judge it, and an A/B's override of
    another threshold keeps it; neither stops with a validation error."""
    recorded = CanaryThresholds.from_record({"stall_s": 0.01, "smoke_requests": 8})
    th = Thresholds.judging(recorded)
    assert (th.stall_s, th.smoke_requests) == (0.01, 8)
    assert th.with_overrides(max_tokens=32).stall_s == 0.01


def test_the_machine_sets_the_client_s_lag_limit_and_a_given_value_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$DSV4OPS_CANARY_LAG_P99_MAX_MS: the machine running the canary (a loaded CI runner, a
    jump host) decides how much of its own event-loop lag it tolerates; a profile cannot."""
    monkeypatch.delenv(LAG_ENV, raising=False)
    assert Thresholds().loop_lag_p99_max_ms == 50.0
    assert thresholds_from_profile(_p("baseline")).loop_lag_p99_max_ms == 50.0
    monkeypatch.setenv(LAG_ENV, "250")
    assert Thresholds().loop_lag_p99_max_ms == 250.0
    assert thresholds_from_profile(_p("baseline")).loop_lag_p99_max_ms == 250.0
    assert Thresholds.judging(CanaryThresholds(smoke_requests=8)).loop_lag_p99_max_ms == 250.0
    assert Thresholds(loop_lag_p99_max_ms=0.0).loop_lag_p99_max_ms == 0.0  # given: kept


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "nan", "inf"])
def test_a_lag_limit_it_cannot_use_is_a_clear_error(
    raw: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsv4ops.cli import main

    monkeypatch.setenv(LAG_ENV, raw)
    with pytest.raises(CanaryError, match=f"{LAG_ENV}='{raw}': expected milliseconds > 0"):
        Thresholds()
    assert main(["canary", "--url", "http://127.0.0.1:1", "--suite", "smoke"]) == 1
    err = capsys.readouterr().err
    assert f"error: {LAG_ENV}='{raw}'" in err and "Traceback" not in err
