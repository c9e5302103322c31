"""The deploy's canary gate (usecases/gate.py): suites chosen by the flag change,
verdicts combined by the canary's own rule, judged by the profile's thresholds."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from dsv4ops.canary import SuiteResult, Thresholds, Verdict
from dsv4ops.deployment import Deployment
from dsv4ops.usecases.gate import SuiteRunner, buckets_of, canary_gate, thresholds_of
from testing.orchestrate import make_deployment, with_recorded

# One suite run's arguments, as the gate passed them (workers made a tuple to compare).
Ran = tuple[str, str, tuple[str, ...], Thresholds, tuple[int, ...], float | None, str, int]


def scripted(verdicts: dict[str, Verdict], ran: list[Ran]) -> SuiteRunner:
    def run(
        suite: str,
        base: str,
        workers: Sequence[str],
        thresholds: Thresholds,
        buckets: tuple[int, ...],
        duration: float | None,
        model: str,
        log_interval: int,
    ) -> SuiteResult:
        ran.append(
            (suite, base, tuple(workers), thresholds, buckets, duration, model, log_interval)
        )
        return SuiteResult(suite, verdicts[suite], reasons=[f"why {suite}", "note: ignored"])

    return run


def flags(**changes: Any) -> dict[str, Any]:
    base = {"overlap_schedule": True, "multi_stream_overlap": False, "decode_buckets": [1, 2]}
    return {**base, **changes}


def previous(recorded_flags: dict[str, Any]) -> Deployment:
    """The deployed one the gate compares with, recording `recorded_flags`."""
    return with_recorded(make_deployment("old"), flags=recorded_flags)


def test_fail_beats_inconclusive_and_ends_the_gate() -> None:
    dep = with_recorded(
        make_deployment("new"), flags=flags(overlap_schedule=False, decode_buckets=[4])
    )
    ran: list[Ran] = []
    verdicts = {"smoke": Verdict.INCONCLUSIVE, "sweep": Verdict.FAIL, "abort-cascade": Verdict.PASS}
    step = canary_gate(
        previous(flags()),
        thresholds=Thresholds(),
        buckets=(4,),
        model="m",
        duration_s=3.0,
        progress=lambda _l: None,
        run=scripted(verdicts, ran),
    )
    verdict, reasons = step(dep, dep.component("router").url())
    assert verdict == "FAIL"
    assert [r[0] for r in ran] == ["smoke", "sweep"]  # nothing runs after the FAIL
    assert reasons == ["smoke: INCONCLUSIVE", "smoke: why smoke", "sweep: FAIL", "sweep: why sweep"]


def test_inconclusive_does_not_end_the_gate_and_is_the_verdict_over_passes() -> None:
    dep = with_recorded(make_deployment("new"), flags=flags(decode_buckets=[4]))
    ran: list[Ran] = []
    step = canary_gate(
        previous(flags()),
        thresholds=Thresholds(),
        buckets=(4,),
        model="m",
        duration_s=3.0,
        progress=lambda _l: None,
        run=scripted({"smoke": Verdict.INCONCLUSIVE, "sweep": Verdict.PASS}, ran),
    )
    assert step(dep, "")[0] == "INCONCLUSIVE"
    assert [r[0] for r in ran] == ["smoke", "sweep"]


def test_suites_get_the_thresholds_the_workers_and_the_duration() -> None:
    dep = make_deployment("new")
    ran: list[Ran] = []
    th = Thresholds(smoke_requests=3)
    step = canary_gate(
        None,
        thresholds=th,
        buckets=(8, 16),
        model="dsv4",
        duration_s=7.0,
        progress=lambda _l: None,
        run=scripted({"smoke": Verdict.PASS}, ran),
    )
    assert step(dep, "") == ("PASS", ["smoke: PASS", "smoke: why smoke"])
    ((suite, base, workers, thresholds, buckets, duration, model, log_interval),) = ran
    assert (suite, base, duration, model) == ("smoke", "http://127.0.0.1:8000", None, "dsv4")
    assert workers == ("http://127.0.0.1:30000", "http://127.0.0.1:30001")
    assert thresholds is th and buckets == (8, 16)
    assert log_interval == 40  # the decode runs SGLang's default


@pytest.mark.parametrize(("given", "expected"), [(None, 4.0), (7.5, 7.5)])
def test_flag_aware_suites_run_the_profiles_gate_duration_unless_one_is_given(
    given: float | None, expected: float
) -> None:
    """`deploy` without --canary-duration, and a gated rollback, pass None: the deployment's
    recorded `canary.gate_duration_s` decides; the progress line says how long each suite runs."""
    dep = with_recorded(
        make_deployment("new"),
        flags=flags(multi_stream_overlap=True),
        content={"canary": {"gate_duration_s": 4.0}},
    )
    ran: list[Ran] = []
    said: list[str] = []
    step = canary_gate(
        previous(flags()),
        thresholds=thresholds_of(dep),
        buckets=(),
        model="m",
        duration_s=given,
        progress=said.append,
        run=scripted({"smoke": Verdict.PASS, "corruption": Verdict.PASS}, ran),
    )
    assert step(dep, "")[0] == "PASS"
    assert [(r[0], r[5]) for r in ran] == [("smoke", None), ("corruption", expected)]
    assert said == ["    canary suite smoke", f"    canary suite corruption ({expected:g} s)"]


def test_suites_size_their_freeze_window_by_the_deployed_decode_log_interval() -> None:
    """The gate judges the deployment it is given: a decode run with --decode-log-interval 200
    rests its progress counter up to 200 iterations, which the metrics freeze window must allow."""
    dep = make_deployment("new")
    dep = replace(
        dep,
        commands_hash="",
        components=tuple(
            replace(c, argv=(*c.argv, "--decode-log-interval", "200")) if c.name == "decode" else c
            for c in dep.components
        ),
    )
    ran: list[Ran] = []
    step = canary_gate(
        previous(flags()),
        thresholds=Thresholds(),
        buckets=(),
        model="m",
        duration_s=1.0,
        progress=lambda _l: None,
        run=scripted({"smoke": Verdict.PASS, "sweep": Verdict.PASS}, ran),
    )
    step(with_recorded(dep, flags=flags(decode_buckets=[4])), "")
    assert [(r[0], r[-1]) for r in ran] == [("smoke", 200), ("sweep", 200)]


def test_thresholds_and_buckets_come_from_the_recorded_profile() -> None:
    dep = with_recorded(
        make_deployment("new"),
        content={"canary": {"smoke_requests": 5}},
        flags={"decode_buckets": [1, 8]},
    )
    assert thresholds_of(dep).smoke_requests == 5
    assert thresholds_of(dep).corruption_max_rate == Thresholds().corruption_max_rate
    assert buckets_of(dep) == (1, 8)
    assert (
        thresholds_of(make_deployment("bare")) == Thresholds()
        and buckets_of(make_deployment("b")) == ()
    )


def test_the_deploy_canary_is_never_skipped_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    """A canary that cannot be imported must stop the deploy, not let it be marked known-good
    without its canary (it used to return None, which the engine ran as 'skipped')."""
    th = Thresholds()
    monkeypatch.setitem(sys.modules, "dsv4ops.canary", None)  # makes the import fail
    with pytest.raises(ImportError):
        canary_gate(
            None, thresholds=th, buckets=(), model="m", duration_s=1.0, progress=lambda _line: None
        )


def test_a_passing_smoke_records_its_throughput_baseline_for_watch() -> None:
    dep = make_deployment("new")

    def run(suite: str, *_args: Any) -> SuiteResult:
        return SuiteResult(
            suite,
            Verdict.PASS,
            metrics={"summary": {"output_throughput": 1234.6, "max_concurrency": 8}},
        )

    step = canary_gate(
        None,
        thresholds=Thresholds(),
        buckets=(8,),
        model="m",
        duration_s=1.0,
        progress=lambda _l: None,
        run=run,
    )
    assert step(dep, "") == ("PASS", ["smoke: PASS", "smoke: baseline 1235 tok/s at concurrency 8"])


def test_a_gate_without_tool_call_checks_says_so_first() -> None:
    """canary.tool_calls false (a model that cannot echo a nonce): the PASS the journal records
    names the checks that did not run, before anything else."""
    ran: list[Ran] = []
    step = canary_gate(
        None,
        thresholds=Thresholds(tool_calls=False),
        buckets=(),
        model="m",
        duration_s=1.0,
        progress=lambda _l: None,
        run=scripted({"smoke": Verdict.PASS}, ran),
    )
    verdict, reasons = step(make_deployment("new"), "")
    assert verdict == "PASS"
    assert reasons[0] == (
        "tool-call checks off by the profile (canary.tool_calls: false): " "none was sent"
    )
    assert Thresholds().tool_calls_off_reason() is None
