"""Known-good means "this exact unit served a proven generation" (engine decisions, scripted
target): one rule for the journal and restore, partial restarts never marked, the automatic
rollback walks the known-good list, a plain deploy refuses an unresolved interrupted operation.
The same behaviours through the real CLI, twin and router: known_good_live_test.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsv4ops.errors import LockHeldError
from dsv4ops.journal.gates import GateSource, GateVerdict
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import RUNBOOK_RUN_ENV, Journal
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.partial import PartialRestartRefused
from dsv4ops.orchestrate.pd import restart_scope
from dsv4ops.orchestrate.restore import fallbacks_for, known_good_ops, rollback_target
from testing.clock import FakeClock
from testing.journal import failed_gates
from testing.orchestrate import FakeControl, make_deployment, operator


def _op(o: Operation | None) -> str:
    assert o is not None  # the journal names an operation here
    return o.op


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def _deploy(
    control: FakeControl, journal: Journal, name: str, offset: int = 0, **kw: Any
) -> Outcome:
    return operator(control, journal).deploy(make_deployment(name, offset), **kw)


def test_a_router_only_restart_is_not_marked_known_good_and_records_what_runs(
    journal: Journal,
) -> None:
    control = FakeControl()
    base = _deploy(control, journal, "baseline")
    assert base.ok and base.op_id is not None  # a deploy that ran journaled its operation
    assert journal.judged()[base.op_id].known_good
    worker_pids = {n: control.running[n] for n in ("prefill", "decode")}
    other = make_deployment("other", offset=7)  # different worker ports: different commands
    out = operator(control, journal).deploy(other, scope=restart_scope(["router"]))
    assert out.ok and out.status == "SUCCEEDED"
    assert (
        "NOT marked known-good" in out.message
        and "marked known-good" not in out.message.replace("NOT marked known-good", "")
    )
    assert {n: control.running[n] for n in worker_pids} == worker_pids  # workers untouched
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    assert op.scope is not None  # the journal recorded it
    assert not journal.judged()[op.op].known_good and op.scope["restarted"] == ["router"]
    # The journal records what really runs: baseline's workers, other's router.
    recorded = op.deployment()
    base_dep = make_deployment("baseline")
    assert recorded.component("decode") == base_dep.component("decode")
    assert recorded.component("router") == other.component("router")
    assert [o.op for o in known_good_ops(journal)] == [base.op_id]
    assert _op(journal.last_known_good()) == base.op_id  # the same rule, not a second one


def test_a_failed_deploy_after_a_partial_restart_rolls_back_to_the_proven_unit(
    journal: Journal,
) -> None:
    control = FakeControl()
    base = _deploy(control, journal, "baseline")
    operator(control, journal).deploy(make_deployment("p", 7), scope=restart_scope(["router"]))
    control.fail_url = ":30010/"  # the next deploy's decode never gets ready
    out = _deploy(control, journal, "broken", 9, fallback=fallbacks_for(journal, None))
    assert out.status == "ROLLED_BACK", out.message
    assert "Running now: baseline" in out.message
    assert _op(journal.deployed()) == base.op_id


def test_a_partial_restart_with_nothing_recorded_is_refused_before_anything_changes(
    journal: Journal,
) -> None:
    control = FakeControl()
    with pytest.raises(PartialRestartRefused, match="no deployment running") as exc:
        operator(control, journal).deploy(
            make_deployment("baseline"), scope=restart_scope(["router"])
        )
    assert exc.value.exit_code == 1 and control.actions() == [] and journal.operations() == []


def test_the_automatic_rollback_tries_the_next_known_good_when_the_first_fails(
    journal: Journal,
) -> None:
    control = FakeControl()
    a = _deploy(control, journal, "a")
    b = _deploy(control, journal, "b", 5)
    candidates = fallbacks_for(journal, None)
    assert [op.op for op, _ in candidates] == [b.op_id, a.op_id]
    control.fail_url = ":30006/"  # b's decode (and the new one on the same port) never ready
    out = _deploy(control, journal, "c", 5, fallback=candidates)
    assert out.status == "ROLLED_BACK", out.message
    assert "Rolling back to b @ c0ffeeb" in out.message and "also failed" in out.message
    assert "Running now: a @ c0ffeea" in out.message
    assert _op(journal.deployed()) == a.op_id


def test_the_walk_is_bounded_and_ends_with_everything_stopped(journal: Journal) -> None:
    control = FakeControl()
    for i, name in enumerate("abcde"):
        _deploy(control, journal, name, i + 1)
    candidates = fallbacks_for(journal, None)
    assert len(candidates) == 3  # MAX_FALLBACKS, newest first
    control.fail_probe = True
    out = _deploy(control, journal, "z", 9, fallback=candidates)
    assert out.status == "FAILED" and "3 tried" in out.message
    assert "Running now: nothing" in out.message and control.running == {}


def test_rollback_with_nothing_running_still_finds_the_known_good_list(journal: Journal) -> None:
    control = FakeControl()
    a = _deploy(control, journal, "a")
    _deploy(control, journal, "b", 5)
    assert operator(control, journal).stop().ok
    target = rollback_target(journal, None)
    others = fallbacks_for(journal, None, exclude_op=target.op)
    assert [op.op for op, _ in others] == [a.op_id]


def test_a_plain_deploy_does_not_silently_abandon_an_unresolved_operation(journal: Journal) -> None:
    control = FakeControl()
    _deploy(control, journal, "baseline")
    op = journal.begin(Kind.DEPLOY, profile={"name": "buckets"})
    journal.transition(op, Status.RUNNING)
    journal.step(op, "start decode", "start")  # its CLI died; its lock is gone
    with pytest.raises(LockHeldError, match="interrupted during 'start decode'") as exc:
        _deploy(control, journal, "baseline")
    assert exc.value.hint is not None  # the refusal says what to do
    assert "--recover" in exc.value.hint
    assert journal.get(op).status is Status.RUNNING and control.lock is None
    out = _deploy(control, journal, "baseline", recover=True)
    assert out.ok and journal.get(op).status is Status.ABANDONED


def test_known_good_is_recorded_only_on_a_proven_success(journal: Journal) -> None:
    op = journal.begin(Kind.DEPLOY, profile={"name": "x"}, components=[{"name": "prefill"}])
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)  # no positive evidence recorded
    assert not journal.judged()[op].known_good and journal.last_known_good() is None
    assert known_good_ops(journal) == []


def test_a_rollback_after_an_ab_whose_cli_died_returns_to_a_not_to_the_newest_block(
    journal: Journal,
) -> None:
    """The CLI running `dsv4ops ab` died mid-experiment: `rollback --recover` must leave the box
    on A, as an interrupted A/B does, even when B's block is the newest proven deployment. The
    blocks are never known-good themselves: A's gated deploy before the experiment is restored."""
    control = FakeControl()
    exp = journal.new_op_id(Kind.EXPERIMENT)
    gated_a = _deploy(control, journal, "a")
    _deploy(control, journal, "b", 5)  # B was known-good before the experiment
    no_gate = operator(control, journal, gate=None)  # (journaled before the experiment's begin:
    no_gate.deploy(make_deployment("a"), reason=f"experiment {exp}: block 0 (A)")  # its lock
    no_gate.deploy(make_deployment("b", 5), reason=f"experiment {exp}: block 1 (B)")  # is ours)
    journal.begin(Kind.EXPERIMENT, op_id=exp, profile={"name": "a vs b", "a": "a", "b": "b"})
    journal.transition(exp, Status.RUNNING)
    block2 = journal.begin(
        Kind.DEPLOY, profile={"name": "b"}, reason=f"experiment {exp}: block 2 (B)"
    )
    journal.transition(block2, Status.RUNNING)
    journal.step(block2, "start decode", "start")  # its CLI died here: nothing known to run
    assert journal.deployed_is_unknown() is not None
    assert rollback_target(journal, None).op == gated_a.op_id
    journal.transition(exp, Status.ABANDONED)  # what the next command's --recover records
    assert rollback_target(journal, None).op == gated_a.op_id
    # someone deployed since, outside the experiment: the usual newest-known-good rule again,
    # and B's gated deploy before the experiment is still known-good (no gate on B failed)
    c = _deploy(control, journal, "c", 9, recover=True)
    assert [o.op for o in known_good_ops(journal)][:3] == [
        c.op_id,
        journal.operations()[1].op,
        gated_a.op_id,
    ]


def test_the_automatic_rollback_never_restores_a_no_canary_deploy(journal: Journal) -> None:
    """A deploy that ran no gate is not known-good: a failed deploy after it rolls back past it
    to the gated one (issue 20: the decode-wedge rehearsal's `--no-canary` deploy)."""
    control = FakeControl()
    gated = _deploy(control, journal, "a")
    blind = operator(control, journal, gate=None).deploy(make_deployment("b", 5))
    assert blind.ok and blind.op_id is not None  # a deploy that ran journaled its operation
    assert not journal.judged()[blind.op_id].known_good
    assert [op.op for op, _ in fallbacks_for(journal, None)] == [gated.op_id]
    control.fail_url = ":30010/"
    out = _deploy(control, journal, "c", 9, fallback=fallbacks_for(journal, None))
    assert out.status == "ROLLED_BACK" and "Running now: a @ c0ffeea" in out.message, out.message


def test_every_gate_the_engine_runs_is_journaled_as_a_gate_result(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 item 2: the deploy's canary gate is recorded as data (journal/gates.py), with
    whose gate it was: a deploy, a gated rollback, `--recover`, a runbook's step; a FAIL on
    the commands judged, which rollback then never offers."""
    control = FakeControl()
    outs = [_deploy(control, journal, "baseline")]
    outs.append(_deploy(control, journal, "baseline", kind=Kind.ROLLBACK))
    outs.append(_deploy(control, journal, "baseline", recover=True))
    monkeypatch.setenv(RUNBOOK_RUN_ENV, "runbook-20261206T000000-abcd")
    outs.append(_deploy(control, journal, "baseline"))
    monkeypatch.delenv(RUNBOOK_RUN_ENV)
    sources = [GateSource.DEPLOY, GateSource.ROLLBACK, GateSource.RECOVER, GateSource.RUNBOOK]
    want = make_deployment("baseline").commands_hash
    for out, source in zip(outs, sources, strict=True):
        assert out.ok and out.op_id is not None, out.message
        (g,) = journal.get(out.op_id).gates
        assert (g.source, g.verdict, g.suite, g.op) == (
            source,
            GateVerdict.PASS,
            "smoke",
            out.op_id,
        )
        assert g.commands_hash == want and g.reasons == ("smoke: PASS",) and g.duration_s == 0
        assert journal.judged()[out.op_id].known_good
    failing = operator(control, journal, gate=lambda _d, _u: ("FAIL", ["smoke: FAIL", "wedged"]))
    bad = failing.deploy(make_deployment("broken", 9), fallback=fallbacks_for(journal, None))
    assert bad.status == "ROLLED_BACK" and bad.op_id is not None
    (g,) = journal.get(bad.op_id).gates
    assert g.verdict is GateVerdict.FAIL and g.failed and g.reasons == ("smoke: FAIL", "wedged")
    assert g.commands_hash == make_deployment("broken", 9).commands_hash
    assert g.commands_hash in failed_gates(journal.operations())
