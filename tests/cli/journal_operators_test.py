"""Two operators, each with a state directory of their own, on one twin target (the real CLI,
the real router): they deploy, roll back and read status and `journal` and see one history and
one known-good list, because the journal of record is the target's; a CLI killed with SIGKILL
mid-deploy is resolved by the other operator, with the right operation named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.journal.records import Status
from testing.orchestrate_cli import assert_baseline_restored, cli
from testing.orchestrate_env import OrchEnv

pytestmark = [pytest.mark.slow, pytest.mark.router]


def _as(monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(state))


def _history(env: OrchEnv, capsys) -> list[tuple[str, str, str]]:
    code, out, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    assert code == 0, err
    assert out["record"]["source"] == "target", out["record"]
    return [(e["id"], e["status"], str(e["known_good"])) for e in out["entries"]]


def test_two_operators_deploy_roll_back_and_read_one_history(env, capsys, monkeypatch, tmp_path):
    alice, bob = env.state_dir, tmp_path / "bob-state"
    _as(monkeypatch, alice)
    code, first, err = cli(env, capsys, "deploy", "baseline", "--yes", "--no-canary", "--json")
    assert code == 0, err

    _as(monkeypatch, bob)  # bob: another machine, an empty state directory
    code, st, err = cli(env, capsys, "status", "--json")
    assert code == 0, err
    assert st["deployed"]["op"] == first["op_id"] and st["deployed"]["known_good"], st["deployed"]
    assert st["record"]["source"] == "target"
    code, second, err = cli(env, capsys, "deploy", "buckets-step4", "--yes", "--no-canary", "--json")
    assert code == 0, err

    _as(monkeypatch, alice)  # alice rolls bob's deploy back: her known-good list has both
    code, back, err = cli(env, capsys, "rollback", "--yes", "--json")
    assert code == 0, err
    assert back["profile"] == "baseline"
    seen_by_alice = _history(env, capsys)
    _as(monkeypatch, bob)
    assert _history(env, capsys) == seen_by_alice
    ids = [i for i, _, _ in seen_by_alice]
    assert ids.index(first["op_id"]) < ids.index(second["op_id"]) < ids.index(back["op_id"])
    code, st, err = cli(env, capsys, "status", "--json")
    assert st["deployed"]["op"] == back["op_id"] and st["deployed"]["by"], st["deployed"]
    assert_baseline_restored(env, capsys)


def test_a_cli_killed_mid_deploy_is_resolved_by_the_other_operator(
    env, capsys, monkeypatch, tmp_path
):
    alice, bob = env.state_dir, tmp_path / "bob-state"
    _as(monkeypatch, alice)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsv4ops", "deploy", "buckets-step4", "--yes", "--no-canary",
         "--target", env.target],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ},
    )
    try:
        for line in proc.stdout or ():
            if "ok" in line and "start decode" in line:
                proc.kill()  # SIGKILL: no handler runs, the lock and an open operation stay
                break
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    _as(monkeypatch, bob)
    code, st, _ = cli(env, capsys, "status", "--json")
    killed = st["lock"]["holder"]["op_id"]
    assert st["lock"]["stale"] and killed.startswith("d-")
    assert any(killed in a and "interrupted" in a for a in st["attention"]), st["attention"]
    code, out, err = cli(env, capsys, "rollback", "--recover", "--yes", "--json")
    assert code == 0, err
    assert any(killed in n and "interrupted" in n for n in out["notes"]), out["notes"]

    _as(monkeypatch, alice)  # alice's view: her op was resolved by bob's rollback
    code, hist, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    entry = next(e for e in hist["entries"] if e["id"] == killed)
    assert entry["status"] == Status.ABANDONED.value and out["op_id"] in entry["message"]
    assert_baseline_restored(env, capsys)
