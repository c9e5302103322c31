"""`dsv4ops journal --id ID`: one operation's outcome and every step it recorded."""

from __future__ import annotations

import json

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment


def _deploy(j: Journal, *, killed: bool) -> str:
    """A deploy journaled as the engine writes one: proven and gated, or killed mid-step."""
    d = make_deployment("baseline")
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    j.step(op, "start prefill", "start")
    j.step(op, "start prefill", "done", duration_s=0.25, detail="pid 4242\nsecond line")
    j.step(op, "wait until decode is ready (/health 200)", "start")
    if killed:
        return op  # its CLI died here: the step never ended, nor the operation
    j.step(op, "wait until decode is ready (/health 200)", "failed", duration_s=7.5, detail="503")
    gate_step(j, op)
    j.transition(op, Status.FAILED, message="decode never ready\nsee its log")
    return op


def test_an_operation_is_shown_step_by_step(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    j = Journal(fresh_target.target)
    failed = _deploy(j, killed=False)
    assert main(["journal", "--id", failed[:-2]]) == 0  # a unique prefix
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert f"deploy {failed} of baseline" in out and out.count(": FAILED") == 1, out
    assert "  message: decode never ready" in lines and "           see its log" in lines
    (prefill,) = [x for x in lines if "start prefill" in x]  # start and end: one row
    assert " done " in prefill and "0.25" in prefill and "pid 4242" in prefill, prefill
    assert "second line" not in out  # a detail's first line only
    (wait,) = [x for x in lines if "wait until decode" in x]
    assert " failed " in wait and "7.5" in wait and "503" in wait, wait
    assert "canary: smoke" in out and "gates: " in out

    assert main(["journal", "--id", failed, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["id"] == failed and doc["status"] == "FAILED" and doc["target"] == j.target
    assert [(s["name"], s["phase"]) for s in doc["steps"]][:2] == [
        ("start prefill", "start"),
        ("start prefill", "done"),
    ]  # every record as written
    assert doc["steps"][1]["detail"] == "pid 4242\nsecond line"
    assert " PASS " in doc["steps"][-1]["gate"] and doc["gates"][0]["verdict"] == "PASS"


def test_a_step_its_process_died_in_is_in_flight_with_the_way_out(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    op = _deploy(Journal(fresh_target.target), killed=True)
    assert main(["journal", "--id", op]) == 0
    out = capsys.readouterr().out
    (wait,) = [x for x in out.splitlines() if x.startswith("20") and "wait until decode" in x]
    assert "IN FLIGHT" in wait, out
    assert "not ended" in out and "next: " in out and "--recover" in out, out


def test_no_such_an_ambiguous_or_an_empty_id_is_refused(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    j = Journal(fresh_target.target)
    _deploy(j, killed=False)
    _deploy(j, killed=False)
    for op_id, why in (
        ("d-nope", "no journal entry matches 'd-nope'"),
        ("d-", "more than one journal entry matches 'd-'"),
        ("", "an empty value names nothing"),
    ):
        assert main(["journal", "--id", op_id]) == 1
        out, err = capsys.readouterr()
        assert why in err and out == "", out + err
    assert main(["journal", "--id", "d-", "--merge"]) == 1
    assert "--merge and --id do different things" in capsys.readouterr().err
