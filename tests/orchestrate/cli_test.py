"""The CLI verbs without a running deployment: dry run, journal listing, refusals."""

from __future__ import annotations

import json
import shlex

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal


def test_dry_run_prints_plan_and_exact_commands_and_touches_nothing(env, capsys):
    code = main(["deploy", "baseline", "--dry-run", "--target", env.target])
    out = capsys.readouterr().out
    assert code == 0
    assert "dry run: nothing is changed" in out
    start = next(
        line
        for line in out.splitlines()
        if "-m dsv4ops.twin.launch_server" in line and "prefill" in line
    )
    argv = shlex.split(start.split("$ ", 1)[1])
    assert f"--port={env.port(30000)}" in argv or str(env.port(30000)) in argv
    assert not (env.workdir / "run").exists() and Journal(env.target).operations() == []


def test_dry_run_json_and_pair_rule_note(env, capsys):
    code = main(
        ["deploy", "baseline", "--dry-run", "--json", "--only", "decode", "--target", env.target]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["dry_run"] and "restarting the pair instead" in data["note"]
    assert [s["title"] for s in data["plan"] if s["action"] == "start"] == [
        "start prefill",
        "start decode",
        "start router",
    ]


def test_journal_lists_operations_as_json(env, capsys):
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


def test_unknown_profile_is_one_clear_error(env, capsys):
    code = main(["deploy", "no-such-profile", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1 and "no-such-profile" in err and "Traceback" not in err


def test_rollback_with_nothing_to_roll_back_to(env, capsys):
    code = main(["rollback", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 2 and "no earlier known-good deployment" in err
