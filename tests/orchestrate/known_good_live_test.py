"""Known-good through the real CLI, the twin and the real sglang-router: a partial restart is not
marked known-good and records what runs; the automatic rollback, and `rollback` with nothing
running, walk the known-good list past one whose probe fails.

`degraded` (testing/orchestrate.py) is baseline with the twin's bootstrap degradation forced:
every /health is 200, every KV transfer is lost, so only the end-to-end probe catches it.
"""

from __future__ import annotations

import pytest

from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.profiles import get_target
from dsv4ops.usecases import render as R
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, assert_baseline_restored, cli

pytestmark = [pytest.mark.slow, pytest.mark.router]


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSV4OPS_READY_TIMEOUT_S", "6")


def _journal_degraded_as_known_good(env: OrchEnv) -> str:
    """What today's main wrote after `deploy degraded --only router`: a known-good record of a
    profile whose whole unit never served (its probe fails)."""
    dep = R.deployment_for("degraded", get_target(env.target))
    j = Journal(env.target)
    op = j.begin(Kind.DEPLOY, profile=dep.profile_record(), components=dep.component_records())
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    running = j.deployed()
    assert running is not None  # the baseline runs
    j.transition(op, Status.SUCCEEDED, running=running.op, known_good=True)
    return op


def test_a_router_only_restart_is_not_known_good_and_a_later_failure_restores_baseline(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    base = Journal(env.target).deployed()
    assert base is not None  # the baseline runs
    code, out, err = cli(
        env, capsys, "deploy", "degraded", "--only", "router", "--yes", "--no-canary", "--json"
    )
    assert code == 0, err
    assert out["status"] == "SUCCEEDED" and "NOT marked known-good" in out["message"], out
    op = Journal(env.target).get(out["op_id"])
    assert op.scope is not None  # a partial restart records its scope
    assert not Journal(env.target).judged()[op.op].known_good and op.scope["kept_from"] == base.op
    code, st, _ = cli(env, capsys, "status", "--json")
    assert st["deployed"]["known_good"] is False and st["deployed"]["partial"] == ["router"]
    assert any(d.startswith("partial restart: router run degraded") for d in st["drift"]), st
    # No false "runs a different command than deployed": the journal recorded what runs.
    assert not any("different command" in d for d in st["drift"]), st["drift"]

    code, out, err = cli(
        env, capsys, "deploy", "decode-never-ready", "--yes", "--no-canary", "--json"
    )
    assert code == 2 and out["status"] == "ROLLED_BACK", err
    assert "Running now: baseline" in out["message"], out["message"]
    assert "degraded" not in out["message"]  # never tried: it was never a proven unit
    assert_baseline_restored(env, capsys)


def test_the_automatic_rollback_walks_past_a_known_good_whose_probe_fails(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    _journal_degraded_as_known_good(env)
    code, out, err = cli(
        env, capsys, "deploy", "decode-never-ready", "--yes", "--no-canary", "--json"
    )
    assert code == 2 and out["status"] == "ROLLED_BACK", err
    msg = out["message"]
    assert "Rolling back to degraded" in msg and "also failed at 'end-to-end probe" in msg, msg
    assert "Running now: baseline" in msg, msg
    assert_baseline_restored(env, capsys)


def test_rollback_with_nothing_running_still_walks_the_known_good_list(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    _journal_degraded_as_known_good(env)
    code, _, err = cli(env, capsys, "stop", "--yes")
    assert code == 0, err
    code, out, err = cli(env, capsys, "rollback", "--yes", "--json")
    assert out["status"] == "ROLLED_BACK" and code == 2, (out, err)  # degraded failed, handled
    assert "No known-good deployment" not in out["message"]
    assert "Running now: baseline" in out["message"], out["message"]
    assert_baseline_restored(env, capsys)
