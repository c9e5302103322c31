"""`runbook abandon` on a real journal (in a temp dir) with a scripted world: which runs it
closes, which it refuses, and what it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from dsv4ops.runbooks.abandon import abandon
from dsv4ops.runbooks.model import RunbookError
from dsv4ops.runbooks.parse import parse_runbook
from dsv4ops.runbooks.run import RunbookFailed, RunbookStopped, Session, run
from dsv4ops.runbooks.runlog import RunLog, fold_run, load, run_state
from testing.clock import FakeClock
from testing.runbooks import FakeExecutor, FakeWorld

BOOK = """\
# Book

1. Look: at it.
   ```dsv4ops
   dsv4ops status --target {target}
   ```
2. Fix: it.
   ```dsv4ops
   dsv4ops rollback --target {target}
   ```
"""


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("t1", directory=tmp_path, clock=FakeClock())


def _stopped_run(journal: Journal) -> str:
    """A run whose step 2 failed: INTERRUPTED, resumable at step 2."""
    ex = FakeExecutor(lambda argv: 1 if argv[1] == "rollback" else 0)
    s = Session(
        runbook=parse_runbook(BOOK, path="book.md"),
        target="t1",
        execute=ex,
        confirm=lambda q: True,
        pause=lambda q: None,
        echo=lambda line: None,
        journal=journal,
        world=FakeWorld(),
        clock=FakeClock(),
        who=lambda: "alice@a",
    )
    with pytest.raises(RunbookFailed):
        run(s)
    return journal.operations()[-1].op


def _abandon(journal: Journal, run_id: str, **kw: object) -> object:
    args: dict[str, object] = {
        "target": "t1",
        "who": "bob@b",
        "reason": "fixed by hand",
        "confirm": lambda q: True,
        "interactive": False,
        "yes": True,
        **kw,
    }
    return abandon(journal, run_id, **args)  # type: ignore[arg-type]


def test_a_stopped_run_is_closed_abandoned_with_who_and_why(journal: Journal) -> None:
    run_id = _stopped_run(journal)
    assert "runbook abandon" in (run_state(journal.get(run_id))[1] or "")  # the next step says so
    before = len(journal.get(run_id).steps)
    out = _abandon(journal, run_id[:12])  # a unique prefix, as --resume takes
    op = journal.get(run_id)
    assert op.status is Status.ABANDONED
    assert op.message is not None and op.message.startswith("abandoned by bob@b: fixed by hand")
    assert "stopped at step 2" in op.message and "nothing on the target was changed" in op.message
    assert out.to_json()["was"] == "INTERRUPTED"  # type: ignore[attr-defined]
    # what the run's steps did stays in its record; only the claim was added
    assert len(op.steps) == before + 1
    rec = fold_run(op)
    assert [(c["who"], c.get("doing"), c.get("reason")) for c in rec.claims] == [
        ("bob@b", "abandoned", "fixed by hand")
    ]
    assert run_state(op) == ("ABANDONED", None)
    with pytest.raises(RunbookError, match="already ended ABANDONED; there is nothing to abandon"):
        _abandon(journal, run_id)


def test_it_asks_first_and_a_no_or_no_terminal_changes_nothing(journal: Journal) -> None:
    run_id = _stopped_run(journal)
    before = len(journal.get(run_id).steps)
    asked: list[str] = []

    def no(question: str) -> bool:
        asked.append(question)
        return False

    with pytest.raises(RunbookStopped, match="was not abandoned: declined; nothing changed"):
        _abandon(journal, run_id, yes=False, interactive=True, confirm=no)
    assert asked and f"abandon run {run_id} of book on t1 (stopped at step 2" in asked[0]
    with pytest.raises(RunbookStopped, match="no terminal is there") as exc:
        _abandon(journal, run_id, yes=False, interactive=False)
    assert exc.value.hint is not None and "--yes" in exc.value.hint
    op = journal.get(run_id)
    assert op.status is Status.INTERRUPTED and len(op.steps) == before
    _abandon(journal, run_id, yes=False, interactive=True, confirm=lambda q: True)
    assert journal.get(run_id).status is Status.ABANDONED


def test_a_run_of_another_target_and_an_id_that_is_no_run_are_refused(
    journal: Journal,
) -> None:
    run_id = _stopped_run(journal)
    with pytest.raises(RunbookError, match="ran against 't1', not 't2'") as exc:
        _abandon(journal, run_id, target="t2")
    assert exc.value.hint is not None and "--target t1" in exc.value.hint
    with pytest.raises(RunbookError):
        _abandon(journal, "d-no-such-run")
    assert journal.get(run_id).status is Status.INTERRUPTED


def test_a_run_held_on_another_machine_is_abandoned_only_by_a_person(journal: Journal) -> None:
    """Bob's resume holds the run from his laptop, where only it can be told whether his process
    lives: refused without a person; a person who says it is gone closes it (journaled)."""
    run_id = _stopped_run(journal)
    bob = {"pid": 4242, "pid_start": 1, "host": "bobs-laptop"}
    claim = {"resumed": True, "claim": "b0b", "who": "bob@b", "owner": bob, "releases": True}
    journal.step(run_id, "run", "done", detail=json.dumps(claim))
    journal.transition(run_id, Status.RUNNING)
    with pytest.raises(RunbookStopped, match=r"being resumed by bob@b \(pid 4242 on bobs-laptop"):
        _abandon(journal, run_id, who="carol@c")
    with pytest.raises(RunbookStopped, match="it was not abandoned: nothing changed"):
        _abandon(journal, run_id, who="carol@c", interactive=True, confirm=lambda q: False)
    assert journal.get(run_id).status is Status.RUNNING
    _abandon(journal, run_id, who="carol@c", interactive=True, confirm=lambda q: True)
    op = journal.get(run_id)
    assert op.status is Status.ABANDONED
    assert [(c["who"], c.get("over")) for c in fold_run(op).claims] == [
        ("bob@b", None),
        ("carol@c", "b0b"),
    ]


def test_a_resume_that_read_the_run_before_it_was_abandoned_runs_nothing(
    journal: Journal,
) -> None:
    """The race, in the journal's order: a resume read the run open, an abandon's claim reached
    the journal first and ended it; the resume's claim then holds nothing and it stops."""
    run_id = _stopped_run(journal)
    read_by_the_resume = load(journal, run_id)
    _abandon(journal, run_id)
    with pytest.raises(
        RunbookStopped,
        match="ended ABANDONED meanwhile, by bob@b; this resume did not start: nothing ran",
    ):
        RunLog(journal).reopen(read_by_the_resume, "carol@c")
    assert journal.get(run_id).status is Status.ABANDONED
