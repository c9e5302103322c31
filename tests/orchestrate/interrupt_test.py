"""Ctrl-C / SIGTERM during an operation, engine decisions with real signals sent to this process
(scripted target). The same through the real CLI process, twin and router:
interrupt_live_test.py."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from dsv4ops.deployment import Deployment
from dsv4ops.journal.records import Operation, Status
from dsv4ops.journal.store import UNKNOWN, Journal
from dsv4ops.orchestrate.status import gather_status
from testing.clock import FakeClock
from testing.orchestrate import (
    FakeControl,
    SignallingControl,
    make_deployment,
    operator,
)


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def _good(control: FakeControl, journal: Journal) -> tuple[Operation, Deployment]:
    out = operator(control, journal).deploy(make_deployment("baseline"))
    assert out.ok
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    return op, op.deployment()


def test_sigint_during_a_wait_is_journaled_and_rolls_back(journal: Journal) -> None:
    control = SignallingControl()
    good = _good(control, journal)
    control.plan = [("wait decode", signal.SIGINT)]
    out = operator(control, journal).deploy(make_deployment("new", 3), fallback=good)
    assert out.interrupted and out.status == "ROLLED_BACK", out.message
    assert "interrupted by SIGINT during 'wait until decode is ready" in out.message
    assert "Running now: baseline" in out.message
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    assert op.status is Status.ROLLED_BACK and op.running == good[0].op
    failed = [s for s in op.steps if s.phase == "failed"]
    assert failed and "interrupted by SIGINT" in (failed[0].detail or "")
    assert control.lock is None and journal.in_flight() == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


def test_sigterm_during_a_start_lets_the_start_finish_then_rolls_back(journal: Journal) -> None:
    control = SignallingControl()
    good = _good(control, journal)
    control.plan = [("start decode", signal.SIGTERM)]
    out = operator(control, journal).deploy(make_deployment("new", 3), fallback=good)
    assert out.interrupted and out.status == "ROLLED_BACK", out.message
    assert "interrupted by SIGTERM after 'start decode'" in out.message
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    start = [s for s in op.steps if s.name == "start decode"]
    assert [s.phase for s in start][:2] == ["start", "done"]  # the start was not cut in half
    assert (start[1].detail or "").startswith("pid ")


def test_a_second_sigint_stops_the_rollback_and_status_names_the_fix(journal: Journal) -> None:
    control = SignallingControl()
    good = _good(control, journal)
    control.plan = [("wait decode", signal.SIGINT), ("wait prefill", signal.SIGINT)]
    out = operator(control, journal).deploy(make_deployment("new", 3), fallback=good)
    assert out.interrupted and out.status == "FAILED", out.message
    assert "The automatic rollback was interrupted too (SIGINT" in out.message
    assert (
        "Running now: unknown" in out.message
        and f"`dsv4ops rollback --target {journal.target}`" in out.message
    )
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    assert op.status is Status.FAILED and op.running == UNKNOWN and control.lock is None
    report = gather_status(control, journal, target="fake")
    assert not report["healthy"]
    assert any(
        "without knowing what runs" in a
        and f"`dsv4ops rollback --target {journal.target}`" in a
        and "baseline" in a
        for a in report["attention"]
    ), report["attention"]


def test_sigint_before_anything_changed_fails_cleanly(journal: Journal) -> None:
    control = SignallingControl()
    _good(control, journal)
    control.running.pop("router")  # nothing to SIGTERM: the drain only watches the workers
    control.plan = [("metrics", signal.SIGINT)]
    out = operator(control, journal).deploy(make_deployment("new", 3))
    assert out.interrupted and out.status == "FAILED", out.message
    assert "Nothing was changed on the target" in out.message
    assert control.actions()[-1] == "unlock" and "stop decode" not in control.actions()[-3:]
