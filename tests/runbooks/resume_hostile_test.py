"""--resume against an edited runbook and two operators resuming one run (issue 21, F5 and the
"not covered" list), with the run journaled in the journal of record through the real agent
(over the real OpenSSH for the second operator)."""

from __future__ import annotations

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
        with pytest.raises(RunbookStopped, match="being resumed by bob@b") as exc:
            run(s)
        assert "nothing ran" in str(exc.value)
    assert alice_ex.calls == [] and [c[1] for c in bob_ex.calls] == ["rollback", "status"]
    rec = fold_run(alice.get(run_id))
    assert rec.status is Status.SUCCEEDED and [c["who"] for c in rec.claims] == ["bob@b", "alice@a"]
