"""`dsv4ops rollback --dry-run` prints the journal's words terminal-safe: a recorded profile name
with an ESC or BEL in it is shown as its escape. Against a twin target where nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.cli import EVIL, SHOWN, printable
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment, make_env


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    e = make_env(tmp_path)
    for k, v in e.environ.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DSV4OPS_TARGET", e.target)
    return e


def test_the_dry_run_shows_a_recorded_profile_name_escaped(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    d = make_deployment("baseline")
    j = Journal(env.target)
    op = j.begin(
        Kind.DEPLOY, profile={**d.profile_record(), "name": EVIL}, components=d.component_records()
    )
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    code = main(["rollback", "--to", op, "--dry-run"])
    both = printable(capsys)
    assert code == 0, both
    assert f"plan: roll back {env.target} to {SHOWN} @ c0ffeebaseli ({op})" in both, both
