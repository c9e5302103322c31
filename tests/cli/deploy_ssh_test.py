"""The `dsv4ops` CLI itself driving the twin on a target reached over SSH (a real OpenSSH server
on 127.0.0.1, its throwaway key and known_hosts): deploy -> status --json -> stop, and a target
whose python lacks dsv4ops failing with one clear sentence instead of a buried traceback."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from dsv4ops.jsontypes import JSONObject
from testing.orchestrate import OrchEnv, our_processes
from testing.remote import SshdServer

pytestmark = [pytest.mark.slow, pytest.mark.router, pytest.mark.ssh]
SSH_TARGET = "twin-ssh"
NO_DSV4OPS = "twin-ssh-bare"  # python without dsv4ops: the twin cannot start there


@pytest.fixture
def ssh_env(env: OrchEnv, sshd: SshdServer) -> OrchEnv:
    """The module's twin environment plus SSH targets to this machine (same workdir and ports)."""
    path = env.profiles_dir / "targets.yaml"
    text = path.read_text()
    if SSH_TARGET not in text:
        local = text.split("targets:\n", 1)[1]
        ssh = (
            "transport: ssh\n    ssh:\n"
            f"      host: 127.0.0.1\n      port: {sshd.port}\n      user: {sshd.user}\n"
            f"      key: {sshd.client_key}\n      known_hosts: {sshd.known_hosts}\n"
            "      trust_on_first_use: false"
        )
        over_ssh = local.replace("transport: local", ssh)
        # The bare target is a box of its own (its own work directory): sharing the work
        # directory would share the journal of record, whose known-good the failed deploy
        # would then restore.
        bare = over_ssh.replace(f"python: {sys.executable}", "python: /usr/bin/python3").replace(
            f"workdir: {env.workdir}", f"workdir: {_bare_workdir(env)}"
        )
        path.write_text(
            text
            + over_ssh.replace(f"  {env.target}:", f"  {SSH_TARGET}:", 1)
            + bare.replace(f"  {env.target}:", f"  {NO_DSV4OPS}:", 1)
        )
    return env


def _bare_workdir(env: OrchEnv) -> Path:
    return env.workdir.with_name(env.workdir.name + "-bare")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, JSONObject, str]:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def test_cli_deploys_checks_and_stops_the_twin_over_ssh(
    ssh_env: OrchEnv, sshd: SshdServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(
        capsys, "deploy", "baseline", "--target", SSH_TARGET, "--yes", "--no-canary"
    )
    assert code == 0, err
    assert out["status"] == "SUCCEEDED" and out["profile"] == "baseline"
    assert set(out["ready_wait_s"]) == {"prefill", "decode", "router"}

    code, st, err = _cli(capsys, "status", "--target", SSH_TARGET)
    assert code == 0, err
    assert st["healthy"] and st["drift"] == [] and st["attention"] == [] and st["lock"] is None
    assert st["deployed"]["profile"] == "baseline" and st["deployed"]["op"] == out["op_id"]
    comps = {c["name"]: c for c in st["components"]}
    assert all(c["alive"] and c["healthy"] for c in comps.values()), comps
    assert comps["decode"]["version"] == "0.5.23" and comps["decode"]["captured_buckets"]
    assert sorted(c["pid"] for c in comps.values()) == our_processes(ssh_env)
    # They really were started through the SSH session: its HOME is the fixture's clean one.
    environ = Path(f"/proc/{comps['decode']['pid']}/environ").read_bytes().split(b"\0")
    assert f"HOME={sshd.directory}/home".encode() in environ

    code, stopped, err = _cli(capsys, "stop", "--target", SSH_TARGET, "--yes")
    assert code == 0 and stopped["status"] == "SUCCEEDED", err
    assert our_processes(ssh_env) == []
    ops = Journal(SSH_TARGET).operations()
    assert [(o.kind.value, o.status.value) for o in ops] == [
        ("deploy", "SUCCEEDED"),
        ("stop", "SUCCEEDED"),
    ]
    assert (
        ops[0].profile is not None
        and ops[0].profile["name"] == "baseline"
        and ops[0].processes.keys() == comps.keys()
    )
    assert Journal(SSH_TARGET).deployed() is None


def test_target_python_without_dsv4ops_fails_with_one_clear_sentence(
    ssh_env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["deploy", "baseline", "--target", NO_DSV4OPS, "--yes", "--no-canary"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "the target's python (/usr/bin/python3) cannot import 'dsv4ops'" in err
    assert "install dsv4ops" in err and "set `python:` for this target" in err
    assert "Running now: nothing" in err
    assert our_processes(ssh_env) == []
    assert our_processes(dataclasses.replace(ssh_env, workdir=_bare_workdir(ssh_env))) == []
    (op,) = Journal(NO_DSV4OPS).operations()
    assert op.status.value == "FAILED" and op.running == ""
