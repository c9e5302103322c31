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


def test_limit_counts_the_newest_and_a_negative_one_is_refused(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--limit -2` listed every entry (read as 0, "all") without a word."""
    j = Journal(env.target)
    ops = []
    for reason in ("first", "second", "third"):
        op = j.begin(Kind.DEPLOY, profile={"name": "baseline", "git_commit": "abc"}, reason=reason)
        j.transition(op, Status.FAILED, message="boom", running="")
        ops.append(op)
    listed = {}
    for limit in ("2", "0"):
        assert main(["journal", "--json", "--limit", limit, "--target", env.target]) == 0
        listed[limit] = [e["id"] for e in json.loads(capsys.readouterr().out)["entries"]]
    assert listed["2"] == ops[1:]
    assert listed["0"][-3:] == ops and len(listed["0"]) == len(Journal(env.target).operations())
    assert main(["journal", "--limit", "-2", "--target", env.target]) == 1
    assert "Invalid value for '--limit': -2 is not in the range x>=0" in capsys.readouterr().err
