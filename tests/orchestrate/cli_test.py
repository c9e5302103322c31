"""The CLI verbs without a running deployment: dry run, journal listing, refusals."""

from __future__ import annotations

import json
import shlex
import time

from dsv4ops.cli import main
from dsv4ops.cli.status import _router_details
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from tests.orchestrate.ops_test import make_deployment


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


# -- user mistakes: one clear line, exit 1, nothing changed ------------------------------------


def _known_good(env, commit: str) -> str:
    """A SUCCEEDED deploy in the journal (nothing runs; rollback --to only looks it up)."""
    d = make_deployment("baseline")
    j = Journal(env.target)
    op = j.begin(
        Kind.DEPLOY,
        profile={**d.profile_record(), "git_commit": commit},
        components=d.component_records(),
    )
    j.transition(op, Status.RUNNING)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def test_rollback_to_an_unknown_id_is_a_user_mistake_listing_the_choices(env, capsys):
    op = _known_good(env, "0123456789abcdef")
    before = Journal(env.target).operations()
    code = main(["rollback", "--to", "nosuchid", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "no deployment in the journal matches 'nosuchid'" in err
    assert f"{op} (baseline @ 0123456789ab)" in err  # what --to accepts: IDs and REVs
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2  # error + hint
    assert Journal(env.target).operations() == before and not (env.workdir / "run").exists()


def test_a_bad_ready_timeout_variable_is_one_clear_line(env, capsys, monkeypatch):
    monkeypatch.setenv("DSV4OPS_READY_TIMEOUT_S", "abc")
    before = Journal(env.target).operations()
    code = main(["stop", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    first = err.strip().splitlines()[0]
    assert "DSV4OPS_READY_TIMEOUT_S='abc'" in first and "positive number" in first
    assert "Traceback" not in err and "internal error" not in err
    assert Journal(env.target).operations() == before  # refused before the stop began


def test_status_says_the_router_is_not_running_instead_of_none(env, capsys):
    code = main(["status", "--target", env.target])
    out = capsys.readouterr().out
    assert code == 0
    router = next(line for line in out.splitlines() if line.startswith("router"))
    assert "router not running" in router and "None" not in out


def test_status_readiness_detail_when_the_router_does_not_answer():
    row = {"name": "router", "alive": True, "readiness": None, "readiness_error": "timed out"}
    assert _router_details(row) == "readiness unreachable (timed out)"
    row = {"name": "router", "alive": True, "readiness": 200, "workers": []}
    assert _router_details(row) == "readiness 200; workers unknown"


def test_kernels_build_into_an_impossible_directory_is_a_clear_error(env, capsys, tmp_path):
    t0 = time.monotonic()
    code = main(["kernels", "build", "--out", "/proc/nope", "--no-interpreter-check"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "--out /proc/nope: cannot create the output directory" in err
    assert "Traceback" not in err and "internal error" not in err
    assert time.monotonic() - t0 < 5  # refused before the compile checks, not after
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["kernels", "build", "--out", str(blocker / "sub"), "--no-interpreter-check"])
    assert code == 1 and "cannot create the output directory" in capsys.readouterr().err
