"""Engine decisions against a scripted target: order, rollback, journal, lock handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.errors import DeployError, LockHeldError
from dsv4ops.journal.backend import JournalSource
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.orchestrate.pd import restart_scope
from testing.clock import FakeClock
from testing.orchestrate import (
    FakeControl,
    StartWatchingControl,
    make_deployment,
    operator,
    passing_gate,
)


def _op(o: Operation | None) -> str:
    assert o is not None  # the journal names an operation here
    return o.op


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def _deployed(control: FakeControl, journal: Journal, name: str = "baseline") -> Operation:
    out = operator(control, journal).deploy(make_deployment(name))
    assert out.ok, out.message
    assert out.op_id is not None  # a deploy that ran journaled its operation
    return journal.get(out.op_id)


def test_safe_order_and_journal_before_each_step(journal: Journal) -> None:
    control = FakeControl()
    out = operator(control, journal).deploy(make_deployment("baseline"))
    assert out.ok and out.status == "SUCCEEDED"
    assert control.actions() == [
        "lock",
        "kill TERM router",  # the drain: the router's graceful shutdown, not a stop
        "stop router",
        "stop decode",
        "stop prefill",
        "start prefill",
        "wait prefill health",  # HTTP /health only: the bootstrap server is up before load
        "start decode",
        "wait decode health",
        "start router",
        "wait router readiness",
        "probe",
        "probe",
        "probe",
        "probe",
        "unlock",
    ]
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    assert op.status is Status.SUCCEEDED and op.running == op.op
    assert op.profile is not None  # the journal recorded it
    assert op.profile["git_commit"] == "c0ffeebaseline" and op.processes["decode"]["pid"]
    starts = [s.name for s in op.steps if s.phase == "start"]
    assert starts[:3] == [P.DRAIN_ROUTER, "stop router", "stop decode"]


def test_failure_after_stop_rolls_back_to_known_good(journal: Journal) -> None:
    control = FakeControl()
    good = _deployed(control, journal)
    control.calls.clear()
    control.fail_url = ":30101/"  # the new decode never gets ready; the known-good one does
    out = operator(control, journal).deploy(
        make_deployment("buckets", offset=100), fallback=(good, good.deployment())
    )
    assert not out.ok and out.status == "ROLLED_BACK"
    assert (
        "failed at 'wait until decode is ready" in out.message and "last log lines" in out.message
    )
    assert (
        "Running now: baseline" in out.message
        and "Done before the failure: stop router" in out.message
    )
    assert out.op_id is not None  # the operation ran, so it was journaled
    assert journal.get(out.op_id).running == good.op
    assert _op(journal.deployed()) == good.op
    # The rollback went through the same safe order and proved itself end to end.
    calls = control.actions()
    after = calls[calls.index("wait decode health") + 1 :]
    assert after[:4] == ["kill TERM router", "stop router", "stop decode", "stop prefill"]
    assert after[4:9] == [
        "start prefill",
        "wait prefill health",
        "start decode",
        "wait decode health",
        "start router",
    ]
    assert after[-2:] == ["probe", "unlock"]


def test_failure_without_known_good_stops_everything(journal: Journal) -> None:
    control = FakeControl(fail_probe=True)
    out = operator(control, journal).deploy(make_deployment("baseline"))
    assert out.status == "FAILED" and "No known-good deployment" in out.message
    assert out.op_id is not None  # the operation ran, so it was journaled
    assert control.running == {} and journal.get(out.op_id).running == ""
    assert "end-to-end probe" in out.message


def test_failed_restore_reports_nothing_running(journal: Journal) -> None:
    control = FakeControl()
    good = _deployed(control, journal)
    control.fail_probe = True
    out = operator(control, journal).deploy(
        make_deployment("x", 5), fallback=(good, good.deployment())
    )
    assert (
        out.status == "FAILED"
        and "also failed" in out.message
        and "Running now: nothing" in out.message
    )
    assert control.running == {}


def test_preflight_problem_changes_nothing(journal: Journal) -> None:
    control = FakeControl(busy_ports={8000: True})
    with pytest.raises(DeployError, match="port 8000 is in use by pid 4242.*Nothing was changed"):
        operator(control, journal).deploy(make_deployment("baseline"))
    assert control.actions() == [] and journal.operations() == []


def test_live_lock_holder_fails_at_once(journal: Journal) -> None:
    control = FakeControl(lock={"op_id": "d-other", "pid": 1, "host": "elsewhere"})
    with pytest.raises(LockHeldError, match="pid 1"):
        operator(control, journal).deploy(make_deployment("baseline"))
    assert journal.operations() == []


def test_stale_lock_of_interrupted_deploy_needs_recover(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    op = journal.begin(Kind.DEPLOY, profile={"name": "buckets"})
    journal.transition(op, Status.RUNNING)
    journal.step(op, "start decode", "start")
    control.lock, control.lock_stale = {"op_id": op, "pid": 99999, "host": "h"}, True
    with pytest.raises(LockHeldError, match="interrupted during 'start decode'") as exc:
        operator(control, journal).deploy(make_deployment("baseline"))
    assert exc.value.hint is not None  # the refusal says what to do
    assert "--recover" in exc.value.hint
    out = operator(control, journal).deploy(make_deployment("baseline"), recover=True)
    assert out.ok and any("ABANDONED" in n or "interrupted" in n for n in out.notes)
    assert journal.get(op).status is Status.ABANDONED
    assert "lock (forced)" in control.calls


def test_partial_scope_keeps_prefill_running(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    prefill_pid = control.running["prefill"]
    control.calls.clear()
    scope = restart_scope(["decode"], allow_partial_pair=True)
    out = operator(control, journal).deploy(make_deployment("baseline"), scope=scope)
    assert out.ok and control.running["prefill"] == prefill_pid
    assert "stop prefill" not in control.calls and "start decode" in control.calls
    assert out.notes and "i-know" in out.notes[0]


def test_stop_stops_in_order_and_records_nothing_running(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    control.calls.clear()
    out = operator(control, journal).stop()
    assert out.ok and control.actions() == [
        "lock",
        "kill TERM router",
        "stop router",
        "stop decode",
        "stop prefill",
        "unlock",
    ]
    assert journal.deployed() is None and control.running == {}


def test_drain_sigterms_the_router_and_waits_for_it_and_the_workers(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    control.calls.clear()
    control.router_drain_polls = 2  # the router lets its streams finish for two polls
    control.busy_metric_reads = 6  # three polls (prefill + decode each) still see work
    lines: list[str] = []
    out = operator(control, journal, lines).deploy(make_deployment("baseline"))
    assert out.ok
    calls = [c for c in control.calls if c != "probe"]
    # SIGTERM first; the router is only stopped (SIGKILL if needed) after the drain.
    assert calls[:2] == ["lock", "kill TERM router"]
    # 3 busy polls, then idle held 0.3 s with the progress counter unmoved (4 polls): a 0
    # gauge alone may be a lagging one (drain.py)
    idle_from = calls.index("stop router")
    assert calls[2:idle_from] == ["metrics"] * 14, calls
    drain = next(t for t in out.steps if t["action"] == "drain")
    assert drain["detail"].startswith("router drained and exited")
    assert "waited for in-flight requests (decode up to 2, prefill up to 2)" in drain["detail"]
    assert drain["detail"].endswith("no requests in flight")
    assert any("drain" in line and "router draining" in line for line in lines)
    stop_router = next(t for t in out.steps if t["title"] == "stop router")
    assert stop_router["detail"] == "exited during the drain"


def test_drain_reports_unreadable_metrics_as_unknown_not_idle(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    control.unreadable_metrics = True
    lines: list[str] = []
    out = operator(control, journal, lines).deploy(make_deployment("baseline"))
    assert out.ok
    drain = next(t for t in out.steps if t["action"] == "drain")
    assert "no requests in flight" not in drain["detail"]
    assert "in-flight requests UNKNOWN on decode (metrics: HTTP 404), prefill" in drain["detail"]
    assert any("decode in-flight UNKNOWN" in line for line in lines)
    assert out.op_id is not None  # the operation ran, so it was journaled
    journaled = [s.detail for s in journal.get(out.op_id).steps if s.name == P.DRAIN_ROUTER]
    assert any(d and "UNKNOWN" in d for d in journaled)


def test_drain_is_bounded(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    control.busy_metric_reads = 10_000
    out = operator(control, journal).deploy(make_deployment("baseline"))
    drain = next(t for t in out.steps if t["action"] == "drain")
    assert out.ok and drain["detail"].startswith("gave up waiting after 60s")


def test_a_busy_decode_that_makes_no_progress_is_stopped_not_drained(journal: Journal) -> None:
    """Rolling back from a wedge: running > 0 with the decode counter frozen is judged within one
    log interval at the slowest step (40 x 0.15 s = 6 s on the box), not waited out to the
    60 s bound; the router, still holding the wedged streams, is stopped too (issue 23)."""
    control = FakeControl()
    _deployed(control, journal)
    control.busy_metric_reads = 10_000
    control.router_drain_polls = 10_000
    control.frozen_decode_tokens = 67734
    out = operator(control, journal).deploy(make_deployment("baseline"))
    drain = next(t for t in out.steps if t["action"] == "drain")
    assert out.ok, out
    assert "made no progress for 6.0s with 2 running" in drain["detail"], drain["detail"]
    assert "wedged, not drained" in drain["detail"] and 6.0 <= drain["duration_s"] < 7.0
    assert "stop router" in control.calls and "stop decode" in control.calls


def test_router_outliving_the_drain_bound_is_killed(journal: Journal) -> None:
    control = FakeControl()
    _deployed(control, journal)
    control.router_drain_polls = 10_000
    out = operator(control, journal).deploy(make_deployment("baseline"))
    drain = next(t for t in out.steps if t["action"] == "drain")
    assert out.ok and drain["detail"].startswith("gave up waiting after 60s (router still up")
    assert "stop router" in control.calls and "router" in control.running  # restarted


def test_the_deploy_runs_exactly_the_steps_its_dry_run_prints(journal: Journal) -> None:
    """One source of the order: the engine runs the plan `deploy --dry-run` shows, without the
    bracket (preflight, lock, journal, mark, unlock) the Operator and operation context do."""
    dep = make_deployment("baseline")
    plan = P.deploy_plan(dep, canary=True)
    out = operator(FakeControl(), journal).deploy(dep)
    assert out.ok, out.message
    ran = [s["title"] for s in out.steps]
    assert ran == [s.title for s in plan if s.action not in P.BRACKET]
    assert [s.action for s in plan if s.action in P.BRACKET] == [
        P.PREFLIGHT,
        P.LOCK,
        P.RECORD,
        P.MARK,
        P.UNLOCK,
    ]
    assert out.op_id is not None  # the operation ran, so it was journaled
    journaled = [s.name for s in journal.get(out.op_id).steps if s.phase == "start"]
    assert journaled == ran


class _Appends:
    """A FileBackend that counts its appends and can show what is on disk."""

    def __init__(self, journal: Journal) -> None:
        self.inner, self.count = journal.backend, 0
        self.path = journal.backend.path

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        self.count += 1
        self.inner.append(data, lock_op=lock_op)

    def refresh(self, *, lock_op: str | None = None) -> None:
        self.inner.refresh(lock_op=lock_op)

    def describe(self) -> JournalSource:
        return self.inner.describe()

    def steps_on_disk(self) -> list[tuple[str, str]]:
        records = [json.loads(line) for line in self.path.read_text().splitlines()]
        return [(r["name"], r["phase"]) for r in records if r["type"] == "step"]


def test_a_step_that_changed_the_target_is_journaled_done_before_it_is_reported(
    journal: Journal,
) -> None:
    """A start's done record names the pid it started: the evidence that the process is this
    operation's, for whoever reads the journal after a kill -9 of the CLI (faults_test). Only a
    step that changes nothing (a wait, the probe, the gate) has its done record ride the next
    step's start record, and every step's action runs with all earlier steps on disk as done."""
    spy = _Appends(journal)
    journal.backend = spy
    seen: dict[str, list[tuple[str, str]]] = {}

    def progress(line: str) -> None:
        if line.startswith("  ok"):
            seen[line.split("(")[0].removeprefix("  ok").strip()] = spy.steps_on_disk()

    control = StartWatchingControl(journal=journal.path)
    op = Operator(
        control, journal, host="fake", clock=FakeClock(), progress=progress, canary=passing_gate
    )
    out = op.deploy(make_deployment("baseline"))
    assert out.ok, out.message
    for title, on_disk in seen.items():
        done_now = (title, "done") in on_disk
        kind = title.split()[0]
        if kind in ("start", "stop"):
            assert done_now, (title, on_disk)  # written before the ok line, never deferred
        elif kind == "wait":
            assert not done_now, title  # rides the next step's start record
    assert set(control.at_start) == {"prefill", "decode", "router"}
    for name, on_disk in control.at_start.items():
        started = [n for n, phase in on_disk if phase == "start"]
        ended = {n for n, phase in on_disk if phase in ("done", "failed")}
        assert started[-1] == f"start {name}"
        assert set(started[:-1]) <= ended, on_disk  # every earlier step is on disk as done
    steps = spy.steps_on_disk()
    assert {n for n, ph in steps if ph == "start"} <= {n for n, ph in steps if ph == "done"}
    assert spy.count < len(steps)  # fewer appends than step records
