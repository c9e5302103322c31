"""`dsv4ops twin hazard`: refused plainly on a real target and before anything is deployed, and
under the deploy lock like a deploy (the force path runs in every rehearsal of
tests/cli/runbook_rehearsal_test.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.deployment import Deployment
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.remote import LocalExecutor, Supervisor, lock_holder
from testing.orchestrate import OrchEnv, add_real_box, kill_all, make_env


def _deployed_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[OrchEnv, Deployment]:
    """A twin target whose journal records baseline as running (nothing listens on its ports)."""
    from dsv4ops.profiles import get_target
    from dsv4ops.usecases.render import deployment_for

    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    journal = Journal(env.target)
    dep = deployment_for("baseline", get_target(env.target))
    op = journal.begin(Kind.DEPLOY, **dep.to_record())
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)
    return env, dep


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
    FAILED (exit 2: a handled failure) when the decode does not take the switch (nothing listens
    on the recorded port)."""
    import io
    import json

    env, dep = _deployed_env(tmp_path, monkeypatch)
    journal = Journal(env.target)
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
    assert main(args) == 1  # declined at the y/N prompt: refused, nothing changed (issue 40)
    assert len(journal.operations()) == n
    capsys.readouterr()
    assert main([*args, "--yes", "--reason", "drill 7", "--json"]) == 2  # a handled FAILURE
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit"] == 2 and "the decode did not take the switch" in doc["error"]
    (hz,) = [o for o in journal.operations() if o.kind is Kind.HAZARD]
    assert hz.status is Status.FAILED and hz.reason == "wedge force: drill 7"
    assert main(["journal", "--json", "--target", env.target]) == 0  # listed like any operation
    (entry,) = [e for e in json.loads(capsys.readouterr().out)["entries"] if e["kind"] == "hazard"]
    assert entry["id"] == hz.op and entry["status"] == "FAILED"


def test_a_hazard_switch_is_refused_while_a_deploy_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A switch takes the deploy lock: while a live deploy holds it, the switch is refused with
    the holder's name, as a second deploy is, and journals nothing."""
    env, _dep = _deployed_env(tmp_path, monkeypatch)
    journal = Journal(env.target)
    supervisor = Supervisor(LocalExecutor(), str(env.workdir), python=sys.executable)
    holder = lock_holder("dsv4ops deploy baseline")
    supervisor.lock_acquire(holder)
    try:
        n = len(journal.operations())
        args = ["twin", "hazard", "wedge", "--state", "force", "--yes", "--target", env.target]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert f"pid {os.getpid()} running 'dsv4ops deploy baseline'" in err, err
        assert "Traceback" not in err
        assert len(journal.operations()) == n
    finally:
        supervisor.lock_release(holder["op_id"])
        kill_all(env)


def test_a_hazard_switch_killed_mid_way_is_abandoned_like_a_deploy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real `twin hazard` process killed while the decode has not answered leaves its RUNNING
    operation under its (now dead) lock: the next switch is refused naming it, and
    `stop --recover` reports it ABANDONED, as it does an interrupted deploy."""
    env, dep = _deployed_env(tmp_path, monkeypatch)
    journal = Journal(env.target)
    args = ["twin", "hazard", "wedge", "--state", "force", "--yes", "--target", env.target]
    try:
        # The decode's port accepts and never answers: the switch is on its way when it connects.
        with socket.create_server(("127.0.0.1", dep.component("decode").port)) as silent:
            silent.settimeout(120)
            proc = subprocess.Popen(
                [sys.executable, "-m", "dsv4ops", *args],
                env={**os.environ, **env.environ},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                conn, _ = silent.accept()
            finally:
                # Killed while the switch waits on the decode. Closed before the kill, the CLI
                # could see the error and send its FAILED transition, which its agent process
                # then wrote after the kill (seen once in a loaded full run).
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
            conn.close()
        (hz,) = [o for o in journal.operations() if o.kind is Kind.HAZARD]
        assert hz.status is Status.RUNNING and hz.reason == "wedge force"
        supervisor = Supervisor(LocalExecutor(), str(env.workdir), python=sys.executable)
        lock = supervisor.lock_info()
        assert lock is not None and lock.stale and lock.holder.get("op_id") == hz.op

        assert main(args) == 1
        err = capsys.readouterr().err
        assert f"hazard {hz.op} of - was interrupted" in err and "--recover" in err, err
        assert [o.op for o in journal.operations() if o.kind is Kind.HAZARD] == [hz.op]

        assert main(["stop", "--recover", "--yes", "--target", env.target]) == 0
        out = capsys.readouterr().out
        assert f"hazard {hz.op} of - was interrupted" in out and "resolved by" in out, out
        assert journal.get(hz.op).status is Status.ABANDONED
        assert supervisor.lock_info() is None
    finally:
        kill_all(env)


def test_the_cli_offers_every_hazard_the_twin_has() -> None:
    from dsv4ops.cli.twin import HAZARDS
    from dsv4ops.twin.config import HAZARD_NAMES

    assert HAZARDS == HAZARD_NAMES
