"""`dsv4ops twin hazard`: refused plainly on a real target and before anything is deployed (the
force path runs in every rehearsal of tests/cli/runbook_rehearsal_test.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.cli import main
from testing.orchestrate import add_real_box, make_env


def test_hazard_switch_only_on_a_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    add_real_box(env)
    assert main(["twin", "hazard", "wedge", "--state", "force", "--target", "box"]) == 1
    err = capsys.readouterr().err
    assert (
        "target 'box' runs real SGLang (launcher 'sglang'): twin hazards can be forced only "
        "on a twin target. Nothing was sent." in err
    )
    assert "Traceback" not in err
    assert main(["twin", "hazard", "degrade", "--state", "force", "--target", env.target]) == 1
    assert "the journal records no running deployment on 'twin-test'" in capsys.readouterr().err
    assert main(["twin", "hazard", "melt", "--state", "force", "--target", env.target]) == 1
    assert "'melt' is not one of 'degrade', 'wedge', 'corrupt'" in capsys.readouterr().err


def test_hazard_takes_the_mutating_flags_and_is_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run sends nothing and says where it would; without --yes it asks (no answer: nothing
    sent, nothing journaled); with --yes it is a journaled HAZARD operation with its --reason,
    FAILED (exit 1: nothing changed) when the decode does not take the switch (nothing listens on the recorded port)."""
    import io
    import json

    from dsv4ops.journal.records import Kind, Status
    from dsv4ops.journal.store import Journal
    from dsv4ops.orchestrate.usecases.render import deployment_for
    from dsv4ops.profiles import get_target

    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    journal = Journal(env.target)
    dep = deployment_for("baseline", get_target(env.target))
    op = journal.begin(Kind.DEPLOY, **dep.to_record())
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)
    url = dep.component("decode").url("/_twin/hazard")
    args = ["twin", "hazard", "wedge", "--state", "force", "--target", env.target]

    assert main([*args, "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "dry_run": True,
        "target": env.target,
        "hazard": "wedge",
        "state": "force",
        "component": "decode",
        "url": url,
    }
    n = len(journal.operations())
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(args) == 130  # declined at the y/N prompt: aborted, as deploy's is
    assert len(journal.operations()) == n
    capsys.readouterr()
    assert main([*args, "--yes", "--reason", "drill 7", "--json"]) == 1  # nothing was changed
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit"] == 1 and "the decode did not take the switch" in doc["error"]
    (hz,) = [o for o in journal.operations() if o.kind is Kind.HAZARD]
    assert hz.status is Status.FAILED and hz.reason == "wedge force: drill 7"
    assert main(["journal", "--json", "--target", env.target]) == 0  # listed like any operation
    (entry,) = [e for e in json.loads(capsys.readouterr().out)["entries"] if e["kind"] == "hazard"]
    assert entry["id"] == hz.op and entry["status"] == "FAILED"
