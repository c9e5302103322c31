"""`dsv4ops deploy` without a running deployment: the dry run, an unknown profile."""

from __future__ import annotations

import io
import json
import shlex

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv


def test_dry_run_prints_plan_and_exact_commands_and_touches_nothing(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_dry_run_json_and_pair_rule_note(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
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


def test_unknown_profile_is_one_clear_error(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["deploy", "no-such-profile", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1 and "no-such-profile" in err and "Traceback" not in err


def test_the_profiles_warnings_are_said_in_the_plan_and_before_the_question(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy said nothing of the hazards `profile validate` warns of (multi-stream overlap's
    tool-call corruption): they are in the dry run (text and --json) and on stderr before the
    confirmation, which is declined here (nothing changes)."""
    hazard = "multi-stream overlap on: the CUDA-graph capture race corrupted tool calls"
    assert main(["deploy", "multi-stream-on", "--dry-run", "--target", env.target]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("warning: ")]
    assert "multi-stream-on.yaml:" in line and hazard in line, out
    assert main(["deploy", "multi-stream-on", "--dry-run", "--json", "--target", env.target]) == 0
    (warning,) = json.loads(capsys.readouterr().out)["warnings"]
    assert hazard in warning
    assert main(["deploy", "baseline", "--dry-run", "--json", "--target", env.target]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    # asked, the warning said first; the operator answers no
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["deploy", "multi-stream-on", "--target", env.target]) == 1
    out, err = capsys.readouterr()
    assert "deploy multi-stream-on" in out and "[y/N]" in out, out
    assert err.startswith("warning: ") and hazard in err.splitlines()[0], err
    assert Journal(env.target).operations() == []


def _running(env: OrchEnv, profile: str) -> str:
    """`profile` journaled as the deployed unit, with the commands hash its render has now."""
    from dsv4ops.journal.records import Kind, Status
    from dsv4ops.usecases.deploy import plan_deploy

    d = plan_deploy(profile, env.target).deployment
    j = Journal(env.target)
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    j.transition(op, Status.SUCCEEDED, running=op)
    return op


def test_restart_is_refused_unless_the_profile_renders_what_runs(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """A restart runbook names the deployed profile by hand (--var profile=...): a wrong one
    deployed another profile under the name of a restart. --restart refuses it, before the plan
    or the question; the same profile is planned as usual."""
    base = ["--restart", "--dry-run", "--target", env.target]
    assert main(["deploy", "baseline", *base]) == 1  # nothing runs: nothing to restart
    assert "the journal records nothing running on" in capsys.readouterr().err
    op = _running(env, "baseline")
    assert main(["deploy", "baseline", *base]) == 0
    assert "dry run: nothing is changed" in capsys.readouterr().out
    assert main(["deploy", "overlap-on", *base]) == 1
    out, err = capsys.readouterr()
    assert "--restart: overlap-on" in err and "renders other commands than what runs" in err
    assert "(baseline @ " in err and op in err and "Nothing was changed" in err, err
    assert f"`dsv4ops deploy baseline --restart --target {env.target}`" in err, err
    assert "plan:" not in out, out
    # without --dry-run: refused before the question (stdin is never read) and the first change
    assert main(["deploy", "overlap-on", "--restart", "--target", env.target]) == 1
    assert "renders other commands than what runs" in capsys.readouterr().err
    assert len(Journal(env.target).operations()) == 1
    # the journal's last word is "unknown" (a deploy that ended without knowing what runs)
    from dsv4ops.journal.records import Kind, Status

    j = Journal(env.target)
    lost = j.begin(Kind.DEPLOY, profile={"name": "baseline"})
    j.transition(lost, Status.RUNNING)
    j.transition(lost, Status.FAILED, message="lost", running="?")
    assert main(["deploy", "baseline", *base]) == 1
    err = capsys.readouterr().err
    assert f"what runs on {env.target} is unknown (deploy {lost} ended without knowing)" in err
