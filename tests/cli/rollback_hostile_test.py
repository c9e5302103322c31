"""`dsv4ops rollback --dry-run` prints the journal's words terminal-safe: a recorded profile name
with an ESC or BEL in it is shown as its escape. Against a twin target where nothing runs."""

from __future__ import annotations

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.cli import EVIL, SHOWN, printable
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment


def test_the_dry_run_shows_a_recorded_profile_name_escaped(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make_deployment("baseline")
    j = Journal(fresh_target.target)
    op = j.begin(
        Kind.DEPLOY, profile={**d.profile_record(), "name": EVIL}, components=d.component_records()
    )
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    code = main(["rollback", "--to", op, "--dry-run"])
    both = printable(capsys)
    assert code == 0, both
    assert f"plan: roll back {fresh_target.target} to {SHOWN} @ c0ffeebaseli ({op})" in both, both
