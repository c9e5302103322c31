"""--resume against an edited runbook and two operators resuming one run (issue 21, F5 and the
"not covered" list), with the run journaled in the journal of record through the real agent
(over the real OpenSSH for the second operator)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from dsv4ops.journal.target import TargetJournal
from dsv4ops.remote import LocalExecutor, Supervisor
from dsv4ops.runbooks.parse import RunbookError, parse_runbook
from dsv4ops.runbooks.run import RunbookFailed, RunbookStopped, Session, run
from dsv4ops.runbooks.runlog import fold_run
from testing.remote import SshdServer
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
3. Check: again.
   ```dsv4ops
   dsv4ops status --target {target}
   ```
"""
EDITED = BOOK.replace(
    "3. Check: again.\n   ```dsv4ops\n   dsv4ops status",
    "3. Check: again.\n   ```dsv4ops\n   dsv4ops stop",
)


def _session(
    journal: Journal,
    text: str,
    who: str,
    ex: FakeExecutor,
    world: FakeWorld | None = None,
    **kw: Any,
) -> tuple[Session, list[str]]:
    out: list[str] = []
    s = Session(
        runbook=parse_runbook(text, path="book.md"),
        target="t1",
        execute=ex,
        confirm=lambda q: True,
        pause=lambda q: None,
        echo=out.append,
        journal=journal,
        world=world or FakeWorld(),
        yes=True,
        who=lambda: who,
        **kw,
    )
    return s, out


def _interrupted_run(journal: Journal) -> str:
    s, _ = _session(
        journal, BOOK, "alice@a", FakeExecutor(lambda argv: 2 if argv[1] == "rollback" else 0)
    )
    with pytest.raises(RunbookFailed):
        run(s)
    return journal.operations()[-1].op


@pytest.fixture
def record(tmp_path: Path) -> Supervisor:
    return Supervisor(LocalExecutor(), str(tmp_path / "workdir"))


def _journal(box: Supervisor, state: Path) -> Journal:
    return Journal("t1", backend=TargetJournal(box, state / "journal" / "t1.jsonl"))


def test_resume_of_an_edited_runbook_is_refused_naming_the_changed_step(
    record: Supervisor, tmp_path: Path
) -> None:
    journal = _journal(record, tmp_path / "alice")
    run_id = _interrupted_run(journal)
    ex = FakeExecutor(lambda argv: 0)
    s, _ = _session(journal, EDITED, "alice@a", ex, resume=run_id)
    with pytest.raises(RunbookError, match=r"changed since the run began \(step 3 changed;") as exc:
        run(s)
    assert "Nothing ran" in str(exc.value) and ex.calls == []  # the target was never stopped
    # The runbook as it was resumes (a prose change outside the steps only gets a note).
    s, out = _session(
        journal, BOOK + "\nA footnote.\n", "alice@a", FakeExecutor(lambda argv: 0), resume=run_id
    )
    run(s)
    assert any("outside its steps" in line for line in out)
    assert journal.get(run_id).status is Status.SUCCEEDED


@pytest.mark.ssh
def test_two_operators_resuming_one_run_only_one_wins(
    record: Supervisor, tmp_path: Path, sshd: SshdServer
) -> None:
    alice = _journal(record, tmp_path / "alice")
    run_id = _interrupted_run(alice)
    with sshd.executor() as executor:
        bob = _journal(
            Supervisor(executor, record.workdir, python="/usr/bin/python3"), tmp_path / "bob"
        )
        bob_ex = FakeExecutor(lambda argv: 0)
        bob_session, _ = _session(bob, BOOK, "bob@b", bob_ex, resume=run_id)

        # Interleave deterministically: bob resumes completely while alice is between reading
        # the run and claiming it; both saw the same state, bob's claim reached the record first.
        between = FakeWorld()
        between.at_first_snapshot = lambda: run(bob_session)
        alice_ex = FakeExecutor(lambda argv: 0)
        s, _ = _session(alice, BOOK, "alice@a", alice_ex, world=between, resume=run_id)
        with pytest.raises(RunbookStopped, match="ended SUCCEEDED meanwhile, by bob@b") as exc:
            run(s)
        assert "nothing ran" in str(exc.value)
    assert alice_ex.calls == [] and [c[1] for c in bob_ex.calls] == ["rollback", "status"]
    rec = fold_run(alice.get(run_id))
    assert rec.status is Status.SUCCEEDED and [c["who"] for c in rec.claims] == ["bob@b", "alice@a"]


def test_a_run_held_on_another_machine_is_taken_over_only_by_a_person(
    record: Supervisor, tmp_path: Path
) -> None:
    """Bob's resume holds the run from his laptop, where only it can be told whether his process
    lives: a script's resume here is refused; a person at a terminal who says it is gone takes
    the run over (journaled), and then holds it."""
    journal = _journal(record, tmp_path / "alice")
    run_id = _interrupted_run(journal)
    bob = {"pid": 4242, "pid_start": 1, "host": "bobs-laptop"}
    claim = {"resumed": True, "claim": "b0b", "who": "bob@b", "owner": bob, "releases": True}
    journal.step(run_id, "run", "done", detail=json.dumps(claim))
    journal.transition(run_id, Status.RUNNING)
    ex = FakeExecutor(lambda argv: 0)
    s, _ = _session(journal, BOOK, "alice@a", ex, resume=run_id, interactive=False)
    with pytest.raises(RunbookStopped, match=r"being resumed by bob@b \(pid 4242 on bobs-laptop"):
        run(s)
    asked: list[str] = []
    s, _ = _session(journal, BOOK, "alice@a", ex, resume=run_id)

    def no(question: str) -> bool:
        asked.append(question)
        return False

    s.confirm = no
    with pytest.raises(RunbookStopped, match="nothing ran"):
        run(s)
    assert ex.calls == [] and "cannot be checked from here" in asked[0], asked
    s, _ = _session(journal, BOOK, "alice@a", ex, resume=run_id)
    run(s)
    assert [c[1] for c in ex.calls] == ["rollback", "status"]
    rec = fold_run(journal.get(run_id))
    assert rec.status is Status.SUCCEEDED, rec
    assert [(c["who"], c.get("over")) for c in rec.claims] == [("bob@b", None), ("alice@a", "b0b")]
