"""Journaled runs and --resume with a real journal (in a temp dir), a scripted world and a
scripted executor: where a resume starts, what it re-checks, when it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import RUNBOOK_RUN_ENV, Journal
from dsv4ops.runbooks.parse import RunbookError, parse_runbook
from dsv4ops.runbooks.run import RunbookFailed, RunbookStopped, Session, run
from dsv4ops.runbooks.runlog import fold_run, run_state
from testing.clock import FakeClock
from testing.runbooks import FakeExecutor, FakeWorld

BOOK = """\
# Book

1. Look: at it.
   ```dsv4ops
   dsv4ops status --target {target}
   ```
2. Wait: for health.
   ```step
   kind: wait
   until: status healthy
   if-failed: 5
   ```
3. Ask: go on?
   ```step
   kind: confirm
   question: Go on?
   ```
4. Restart: the pair.
   ```dsv4ops
   dsv4ops deploy {profile} --target {target}
   ```
5. Keep: the evidence.
   ```step
   kind: diagnostics
   max-bytes: 1234
   ```
"""


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("t1", directory=tmp_path, clock=FakeClock())


def session(
    journal: Journal, world: FakeWorld, ex: FakeExecutor, **kw: Any
) -> tuple[Session, list[str]]:
    out: list[str] = []
    answers = kw.pop("answers", [True, True, True])
    variables = kw.pop("variables", {"profile": "baseline"})
    s = Session(
        runbook=parse_runbook(BOOK, path="book.md"),
        target="t1",
        execute=ex,
        confirm=lambda q: answers.pop(0),
        pause=lambda q: None,
        echo=out.append,
        variables=variables,
        journal=journal,
        world=world,
        clock=FakeClock(),
        who=lambda: "alice@laptop",
        **kw,
    )
    return s, out


def test_a_run_is_one_journal_operation_with_each_step(journal: Journal) -> None:
    world, ex = FakeWorld(), FakeExecutor(lambda argv: 0)
    s, out = session(journal, world, ex)
    run(s)
    op = journal.operations()[-1]
    assert (
        op.kind is Kind.RUNBOOK
        and op.status is Status.SUCCEEDED
        and not op.proven
        and journal.judged() == {}
    )
    rec = fold_run(op)
    assert rec.runbook == "book" and rec.target == "t1" and rec.variables == {"profile": "baseline"}
    assert sorted(rec.done) == [1, 2, 3, 4, 5]  # 2 held: no branch
    assert rec.started[1]["preconditions"]["deployed"]["commit"] == "abc123"
    assert rec.done[3]["confirmation"]["by"] == "alice@laptop"
    assert rec.done[3]["confirmation"]["how"] == "prompt" and rec.done[3]["confirmation"]["at"]
    assert all(e[RUNBOOK_RUN_ENV] == op.op for e in ex.envs)  # the commands point to the run
    assert journal.in_flight() == []  # a run never counts as an interrupted operation


def test_branch_on_a_failed_wait(journal: Journal) -> None:
    world, ex = FakeWorld(), FakeExecutor(lambda argv: 0)
    world.failing = {"status healthy"}
    s, _ = session(journal, world, ex)
    run(s)
    rec = fold_run(journal.operations()[-1])
    assert rec.done[2] == {**rec.done[2], "outcome": "failed", "branched": True, "next": 5}
    assert 3 not in rec.done and world.bundles == [(rec.op, 1234)]


def test_a_refused_confirmation_when_nobody_can_answer(journal: Journal) -> None:
    world, ex = FakeWorld(), FakeExecutor(lambda argv: 0)
    s, _ = session(journal, world, ex, interactive=False)
    with pytest.raises(RunbookStopped, match="stopped at step 3: it needs a confirmation"):
        run(s)
    rec = fold_run(journal.operations()[-1])
    # stopped where --resume continues it: INTERRUPTED, with the command (never left RUNNING)
    assert rec.status is Status.INTERRUPTED and rec.done[3]["outcome"] == "refused"
    op = journal.operations()[-1]
    assert "--resume " + op.op in (op.message or "") and run_state(op)[0] == "INTERRUPTED"
    assert [c[1] for c in ex.calls] == ["status"]  # nothing after it ran


def test_resume_continues_after_the_last_completed_step(journal: Journal) -> None:
    world = FakeWorld()
    ex = FakeExecutor(lambda argv: 2 if argv[1] == "deploy" else 0)
    s, _ = session(journal, world, ex)
    with pytest.raises(RunbookFailed):
        run(s)
    run_id = journal.operations()[-1].op
    ex2 = FakeExecutor(lambda argv: 0)
    s, out = session(journal, world, ex2, resume=run_id, yes=True, variables=None)
    run(s)
    assert [c[1] for c in ex2.calls] == ["deploy"]  # steps 1-3 are not run again
    assert ex2.calls[0][2] == "baseline"  # the recorded --var
    assert "step 4 (Restart) is not safe to repeat" in out  # it had failed: asked again (--yes)
    assert journal.get(run_id).status is Status.SUCCEEDED


def test_a_step_not_safe_to_repeat_needs_a_fresh_confirmation(journal: Journal) -> None:
    world = FakeWorld()
    s, _ = session(journal, world, FakeExecutor(lambda argv: 2 if argv[1] == "deploy" else 0))
    with pytest.raises(RunbookFailed):
        run(s)
    run_id = journal.operations()[-1].op
    s, _ = session(journal, world, FakeExecutor(), resume=run_id, answers=[False])
    with pytest.raises(RunbookStopped, match="step 4 is not safe to repeat and was not confirmed"):
        run(s)
    s, _ = session(journal, world, FakeExecutor(), resume=run_id, interactive=False)
    with pytest.raises(RunbookStopped, match="not safe to repeat"):
        run(s)


def test_resume_refused_when_the_preconditions_changed(journal: Journal) -> None:
    world = FakeWorld()
    s, _ = session(journal, world, FakeExecutor(lambda argv: 2 if argv[1] == "deploy" else 0))
    with pytest.raises(RunbookFailed):
        run(s)
    run_id = journal.operations()[-1].op
    world.state["components"]["decode"]["healthy"] = False
    world.state["deployed"]["op"] = "d-2"
    world.state["components"]["decode"]["running"] = 7  # load alone never refuses
    ex = FakeExecutor()
    s, out = session(journal, world, ex, resume=run_id, yes=True, interactive=False)
    with pytest.raises(RunbookStopped) as exc:
        run(s)
    assert (
        "the target changed since it stopped (deployed op: d-1 -> d-2; decode healthy: "
        "True -> False). Nothing ran." in str(exc.value)
    )
    assert "preconditions (for information): decode running: 0 -> 7" in out
    assert ex.calls == []
    # A person at a terminal may go on anyway.
    s, _ = session(
        journal, world, FakeExecutor(lambda argv: 0), resume=run_id, answers=[True, True, True]
    )
    run(s)
    assert journal.get(run_id).status is Status.SUCCEEDED


def test_resume_refusals(journal: Journal) -> None:
    world = FakeWorld()
    s, _ = session(journal, world, FakeExecutor(lambda argv: 0))
    run(s)
    done = journal.operations()[-1].op
    s, _ = session(journal, world, FakeExecutor(), resume=done)
    with pytest.raises(RunbookError, match="ended SUCCEEDED; there is nothing to resume"):
        run(s)
    deploy = journal.begin(Kind.DEPLOY, profile={"name": "baseline"})
    s, _ = session(journal, world, FakeExecutor(), resume=deploy)
    with pytest.raises(RunbookError, match="is a deploy, not a runbook run"):
        run(s)
    s, _ = session(journal, world, FakeExecutor(), resume="nope")
    with pytest.raises(RunbookError, match="no journal entry matches 'nope'"):
        run(s)


def test_ctrl_c_at_a_prompt_says_what_ran_and_how_to_resume(journal: Journal) -> None:
    world = FakeWorld()

    def ctrl_c(question: str) -> bool:
        raise KeyboardInterrupt

    s, out = session(journal, world, FakeExecutor(lambda argv: 0))
    s.confirm = ctrl_c
    with pytest.raises(KeyboardInterrupt):
        run(s)
    run_id = journal.operations()[-1].op
    assert "interrupted.\nBefore it:\n  step 1: `dsv4ops status --target t1` exited 0" in "\n".join(
        out
    )
    assert out[-1] == f"resume with: dsv4ops runbook run book.md --target t1 --resume {run_id}"
    rec = fold_run(journal.get(run_id))
    assert rec.done[3]["outcome"] == "interrupted" and rec.resume_at == 3
