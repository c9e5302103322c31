"""The throughput baseline read back from the journal: the deployed commands' newest canary
gate that recorded one (the gate writes it, usecases/gate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.journal.gates import GateResult, GateSource, GateVerdict
from dsv4ops.journal.lazy import Entry
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import Journal
from dsv4ops.journal.view import View
from dsv4ops.watch.baseline import baseline_from_operations

CANARY = "canary: smoke + the suites the change calls for"


def _deploy(j: Journal, commands_hash: str | None, detail: str | None) -> str:
    """A deploy whose canary gate passed with `detail`'s reasons ("; "-separated after "PASS (")
    as its GateResult, as the engine records it (None: no canary). `commands_hash` None: a
    record of a release before the hash."""
    profile = {"name": "baseline", "commands_hash": commands_hash}
    op = j.begin(Kind.DEPLOY, profile={k: v for k, v in profile.items() if v is not None})
    j.transition(op, Status.RUNNING)
    if detail is not None:
        reasons = tuple(detail.removeprefix("PASS (").removesuffix(")").split("; "))
        g = GateResult("smoke", GateVerdict.PASS, GateSource.DEPLOY, op, commands_hash, reasons)
        j.step(op, CANARY, "start")
        j.step(op, CANARY, "done", detail=detail, gate=g)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def test_the_deployed_commands_newest_canary_baseline(tmp_path: Path) -> None:
    j = Journal("t", directory=tmp_path)
    assert baseline_from_operations(j.operations(), j.deployed()) is None
    old = _deploy(j, "h1", "PASS (smoke: PASS; smoke: baseline 900 tok/s at concurrency 8)")
    _deploy(j, "h2", "PASS (smoke: PASS; smoke: baseline 5000 tok/s at concurrency 8)")
    again = _deploy(j, "h1", None)  # the same commands redeployed without a canary
    deployed = j.deployed()
    assert deployed is not None and deployed.op == again
    b = baseline_from_operations(j.operations(), deployed)
    assert b is not None and (b.tokens_per_s, b.concurrency) == (900.0, 8) and old in b.source


def test_no_baseline_when_the_canary_recorded_none(tmp_path: Path) -> None:
    j = Journal("t", directory=tmp_path)
    _deploy(j, "h1", "PASS (smoke: PASS)")
    assert baseline_from_operations(j.operations(), j.deployed()) is None


def test_a_walk_back_that_finds_nothing_reads_no_other_commands_deploy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the journal's index (issue 21): deploys of other commands are skipped unread."""
    j = Journal("t", directory=tmp_path)
    for _ in range(5):
        _deploy(j, "h2", "PASS (smoke: PASS; smoke: baseline 5000 tok/s at concurrency 8)")
    mine = _deploy(j, "h1", None)
    ops, deployed = j.operations(), j.deployed()
    loaded: list[str] = []
    load = View.load

    def counted(self: View, e: Entry, **kw: bool) -> Operation:
        loaded.append(e.op)
        return load(self, e, **kw)

    monkeypatch.setattr(View, "load", counted)
    assert baseline_from_operations(ops, deployed) is None
    assert loaded == [mine]
    assert baseline_from_operations(list(ops), deployed) is None  # the plain walk agrees


def test_the_baseline_is_read_off_the_gate_never_off_a_step_s_name(tmp_path: Path) -> None:
    """A step named like the canary whose detail says a baseline proves nothing (no GateResult
    of a passed gate recorded it); a failed gate's baseline is no baseline either."""
    j = Journal("t", directory=tmp_path)
    op = _deploy(j, "h1", None)
    assert baseline_from_operations(j.operations(), j.get(op)) is None
    words = _deploy(j, "h1", None)
    j.step(words, CANARY, "done", detail="PASS (smoke: baseline 900 tok/s at concurrency 8)")
    assert baseline_from_operations(j.operations(), j.get(words)) is None
    failed = _deploy(j, "h1", None)
    reasons = ("smoke: FAIL", "smoke: baseline 900 tok/s at concurrency 8")
    g = GateResult("smoke", GateVerdict.FAIL, GateSource.DEPLOY, failed, "h1", reasons)
    j.step(failed, CANARY, "failed", detail="verdict FAIL", gate=g)
    assert baseline_from_operations(j.operations(), j.get(failed)) is None


def test_a_record_without_a_commands_hash_is_judged_by_its_own_gate_only(tmp_path: Path) -> None:
    """Which other operations ran the same commands cannot be told without the hash: another
    profile's baseline is no evidence about this one (it was read as the baseline)."""
    j = Journal("t", directory=tmp_path)
    _deploy(j, "h2", "PASS (smoke: PASS; smoke: baseline 5000 tok/s at concurrency 8)")
    _deploy(j, None, None)
    assert baseline_from_operations(j.operations(), j.deployed()) is None
    assert baseline_from_operations(list(j.operations()), j.deployed()) is None
    own = _deploy(j, None, "PASS (smoke: PASS; smoke: baseline 900 tok/s at concurrency 8)")
    b = baseline_from_operations(j.operations(), j.deployed())
    assert b is not None and (b.tokens_per_s, b.concurrency) == (900.0, 8) and own in b.source
