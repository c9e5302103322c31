"""Two operators, each with a state directory of their own, on one twin target (the real CLI,
the real router): they deploy, roll back and read status and `journal` and see one history and
one known-good list, because the journal of record is the target's; a CLI killed with SIGKILL
mid-deploy is resolved by the other operator, with the right operation named. (On a main before
the journal of record, bob's status says nothing is deployed and his rollback knows no
known-good.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv, cli, commit_all

# Gated deploys (known-good needs a gate; an INCONCLUSIVE on a loaded machine is accepted).
GATED = ("--canary-duration", "2", "--accept-inconclusive-canary")

pytestmark = [pytest.mark.slow, pytest.mark.router]

# Bob's profile: another profile whose change from baseline calls for the smoke suite alone. It
# was buckets-step4, whose bucket change adds the sweep to the gate (~4 s alone, several times
# that on CI's loaded cores): no part of what this test checks.
BOB = "bob-baseline"
BOB_PROFILE = """\
schema_version: 1
extends: baseline
description: baseline as bob deploys it (one more environment variable on the decode)
decode:
  env: {DSV4OPS_TEST_OPERATOR: bob}
"""


def _as(monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(state))


def _history(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str, str]]:
    code, out, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    assert code == 0, err
    assert out["record"]["source"] == "target", out["record"]
    return [(e["id"], e["status"], str(e["known_good"])) for e in out["entries"]]


def _killed_mid_deploy(env: OrchEnv, profile: str) -> None:
    """The real CLI, SIGKILLed right after 'start decode': no handler runs, the lock and an
    unfinished operation stay behind."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "deploy",
            profile,
            "--yes",
            "--no-canary",
            "--target",
            env.target,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ},
    )
    try:
        for line in proc.stdout or ():
            if "ok" in line and "start decode" in line:
                proc.kill()
                break
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL


def test_two_operators_deploy_roll_back_and_resolve_each_others_crash(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    alice, bob = env.state_dir, tmp_path / "bob-state"
    (env.profiles_dir / f"{BOB}.yaml").write_text(BOB_PROFILE)
    commit_all(env, "bob's profile")
    _as(monkeypatch, alice)
    code, first, err = cli(env, capsys, "deploy", "baseline", "--yes", *GATED, "--json")
    assert code == 0, err

    _as(monkeypatch, bob)  # bob: another machine, an empty state directory
    code, st, err = cli(env, capsys, "status", "--json")
    assert code == 0, err
    assert st["deployed"]["op"] == first["op_id"] and st["deployed"]["known_good"], st["deployed"]
    assert st["record"]["source"] == "target"
    code, second, err = cli(env, capsys, "deploy", BOB, "--yes", *GATED, "--json")
    assert code == 0, err

    _as(monkeypatch, alice)  # alice's CLI dies mid-deploy
    _killed_mid_deploy(env, "baseline")

    _as(monkeypatch, bob)  # bob is paged: the lock and the journal name alice's operation
    code, st, _ = cli(env, capsys, "status", "--json")
    killed = st["lock"]["holder"]["op_id"]
    assert st["lock"]["stale"] and killed.startswith("d-") and killed != second["op_id"]
    assert any(killed in a and "interrupted" in a for a in st["attention"]), st["attention"]
    # Its process is gone: the journal does not call it RUNNING, and names the recover command.
    code, hist, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    dead = next(e for e in hist["entries"] if e["id"] == killed)
    assert dead["status"] == "ABANDONED" and "rollback --recover" in dead["next"], dead
    assert any(o["id"] == killed and o["status"] == "ABANDONED" for o in st["open"]), st["open"]
    code, back, err = cli(env, capsys, "rollback", "--recover", "--yes", "--json")
    assert code == 0, err
    assert any(killed in n and "interrupted" in n for n in back["notes"]), back["notes"]
    # The last known-good of the shared list: bob's own deploy, which alice's machine never ran
    # (unless its gate was an accepted INCONCLUSIVE and alice's a PASS: that ranks below).
    gate = {
        d["profile"]: next(s["detail"] for s in d["steps"] if s["action"] == "canary")
        for d in (first, second)
    }
    below = gate[BOB].startswith("INCONCLUSIVE") and gate["baseline"].startswith("PASS")
    assert back["profile"] == ("baseline" if below else BOB), gate
    # recovered: a second --recover has nothing to do, says so and changes nothing (issue 40:
    # it used to roll the box back to an older known-good)
    n = len(Journal(env.target).operations())
    code, again, err = cli(env, capsys, "rollback", "--recover", "--yes", "--json")
    assert code == 1 and "nothing to recover on" in again["error"], (again, err)
    assert "(without --recover)" in again["hint"]
    assert len(Journal(env.target).operations()) == n

    seen_by_bob = _history(env, capsys)
    _as(monkeypatch, alice)
    assert _history(env, capsys) == seen_by_bob
    ids = [i for i, _, _ in seen_by_bob]
    assert ids == [first["op_id"], second["op_id"], killed, back["op_id"]]
    code, hist, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    entry = next(e for e in hist["entries"] if e["id"] == killed)
    assert entry["status"] == Status.ABANDONED.value and back["op_id"] in entry["message"]
    code, st, err = cli(env, capsys, "status", "--json")
    assert code == 0 and st["healthy"], st
    assert st["deployed"]["op"] == back["op_id"] and st["deployed"]["profile"] == back["profile"]
    assert st["lock"] is None and st["attention"] == []
