"""`dsv4ops stop` prints its progress terminal-safe: a line quoting the journal (a recorded
profile name) shows an ESC or BEL as its escape. Against a twin target where nothing runs."""

from __future__ import annotations

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.cli import EVIL, SHOWN, printable
from testing.orchestrate import OrchEnv, make_deployment


def test_a_progress_line_quoting_the_journal_is_printed_escaped(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stop --recover` resolves an interrupted deploy and says so in a progress line naming its
    profile as recorded (the progress printer every verb shares, cli/_context.py)."""
    d = make_deployment("baseline")
    j = Journal(fresh_target.target)
    op = j.begin(
        Kind.DEPLOY, profile={**d.profile_record(), "name": EVIL}, components=d.component_records()
    )
    j.transition(op, Status.RUNNING)  # its CLI died: in flight
    assert main(["stop", "--yes", "--recover"]) == 0
    both = printable(capsys)
    assert f"note: deploy {op} of {SHOWN} was interrupted" in both, both
