"""`dsv4ops journal`: the operations listing, as a table and as JSON."""

from __future__ import annotations

import json

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv


def test_journal_lists_operations_as_json(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
    j = Journal(env.target)
    op = j.begin(Kind.DEPLOY, profile={"name": "baseline", "git_commit": "abc"}, reason="why not")
    j.transition(op, Status.RUNNING)
    j.transition(op, Status.FAILED, message="boom", running="")
    assert main(["journal", "--json", "--target", env.target]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["entries"]
    assert entry["status"] == "FAILED" and entry["reason"] == "why not" and entry["commit"] == "abc"
    assert main(["journal", "--target", env.target]) == 0
    assert "FAILED" in capsys.readouterr().out
