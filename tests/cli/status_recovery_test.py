"""The commands `status` and a refused `deploy` print to resolve what an interrupted operation
left: each names the target it is about (pasted as printed, it must not act on the default
target), `stop --recover` is always offered, and `rollback --recover` only when the journal
holds a known-good deployment to restore. Against a twin target where nothing runs."""

from __future__ import annotations

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.gates import GateResult, GateSource, GateVerdict
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv, make_deployment

CANARY = "canary: smoke + the suites the change calls for"  # the step the engine journals


def _interrupted(j: Journal) -> str:
    """A deploy whose CLI died mid-start: in flight, no live lock names it."""
    d = make_deployment("baseline")
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    return op


def _known_good(j: Journal) -> str:
    """A deploy whose whole unit served through the router and whose canary gate passed."""
    d = make_deployment("baseline")
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    gate = GateResult("smoke", GateVerdict.PASS, GateSource.DEPLOY, op, None, ("smoke: PASS",))
    j.step(op, CANARY, "start")
    j.step(op, CANARY, "done", detail="PASS", gate=gate)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def test_with_nothing_known_good_the_recovery_names_the_target_and_offers_stop(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    t = fresh_target.target
    op = _interrupted(Journal(t))
    main(["status", "--target", t])
    out = capsys.readouterr().out
    note = next(ln for ln in out.splitlines() if op in ln and "interrupted" in ln)
    assert f"`dsv4ops stop --recover --target {t}`" in note, note
    assert f"`dsv4ops deploy PROFILE --recover --target {t}`" in note, note
    assert "rollback --recover" not in note, note  # it would fail: nothing to restore
    # A deploy is refused until it is resolved; its hint says the same, for that target.
    assert main(["deploy", "baseline", "--target", t, "--yes", "--no-canary"]) == 1
    err = capsys.readouterr().err
    assert f"`dsv4ops stop --recover --target {t}`" in err, err
    assert "rollback --recover" not in err, err
    # rollback --recover, tried anyway, is refused (nothing to restore) and says what works
    assert main(["rollback", "--recover", "--target", t, "--yes"]) == 1
    err = capsys.readouterr().err
    assert "no earlier known-good deployment" in err, err
    assert f"`dsv4ops stop --recover --target {t}`" in err, err


def test_with_a_known_good_rollback_recover_is_offered_for_that_target(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    t = fresh_target.target
    j = Journal(t)
    good = _known_good(j)
    op = _interrupted(j)
    main(["status", "--target", t])
    out = capsys.readouterr().out
    note = next(ln for ln in out.splitlines() if op in ln and "interrupted" in ln)
    assert f"`dsv4ops rollback --recover --target {t}`" in note and good in note, note
    assert f"`dsv4ops stop --recover --target {t}`" in note, note


def test_drift_of_a_component_down_names_the_deploy_that_restarts_the_unit(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal says baseline runs; none of its processes does (they died)."""
    t = fresh_target.target
    _known_good(Journal(t))
    assert main(["status", "--target", t]) == 2
    out = capsys.readouterr().out
    assert "decode is not running, but baseline is deployed" in out, out
    assert f"`dsv4ops deploy baseline --target {t}` restarts prefill, decode and router" in out
