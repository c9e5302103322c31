"""Fault tests: each ends with the previous deployment restored and healthy, no orphaned
processes and a consistent journal (local executor, twin + real router)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.outcome import Outcome
from testing.orchestrate import (
    OrchEnv,
    assert_baseline_restored,
    cli,
    deploy_via_operator,
    read_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.router]


@pytest.fixture
def short_ready_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # Readiness waits time out in seconds, not minutes, so a component that never becomes ready
    # fails fast (the twin starts in ~1 s idle). Only where a test needs it: the variable bounds
    # every wait (the probe's requests, the restore's readiness too), and 6 s everywhere failed
    # a healthy deploy on a loaded CI machine.
    monkeypatch.setenv("DSV4OPS_READY_TIMEOUT_S", "12")


def _rolled_back(out: Outcome, step_word: str) -> None:
    assert not out.ok and out.status == Status.ROLLED_BACK.value, out.message
    assert step_word in out.message
    assert "Rolled back automatically" in out.message and "Running now: baseline" in out.message


def test_prefill_dies_while_decode_starts(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running

    killed: list[int] = []

    def kill_prefill(line: str) -> None:
        # Once: the moment the new decode has been started, the new prefill dies.
        if "start decode" in line and line.lstrip().startswith("ok") and not killed:
            rec = json.loads((env.workdir / "run" / "prefill.json").read_text())
            os.killpg(rec["pgid"], signal.SIGKILL)
            killed.append(rec["pid"])

    out = deploy_via_operator(env, "buckets-step4", progress=kill_prefill)
    assert killed
    _rolled_back(out, "failed at")
    # seen within a wait slice of the router's readiness, not at its 180 s timeout
    assert f"prefill (pid {killed[0]}, started by this run) exited while waiting for" in out.message
    assert "failed at 'wait until router is ready" in out.message
    assert "--- last log lines of prefill ---" in out.message
    assert_baseline_restored(env, capsys)


def test_decode_never_becomes_ready(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str], short_ready_wait: None
) -> None:
    out = deploy_via_operator(baseline_running, "decode-never-ready")
    _rolled_back(out, "wait until decode is ready")
    assert "last log lines" in out.message  # the timeout shows the decode's log tail
    assert_baseline_restored(baseline_running, capsys)


def test_router_fails_to_start(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(baseline_running, capsys, "deploy", "router-broken", "--yes", "--no-canary")
    assert code == 2
    assert "wait until router is ready" in err and "exited" in err
    assert "Fatal Python error" in err  # the router's own complaint, from its log tail
    assert "Running now: baseline" in err
    assert_baseline_restored(baseline_running, capsys)


def test_end_to_end_probe_fails_on_bootstrap_degradation(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        baseline_running, capsys, "deploy", "degraded", "--yes", "--no-canary", "--json"
    )
    assert code == 2
    assert out["status"] == "ROLLED_BACK" and "end-to-end probe" in out["message"]
    titles = [s["title"] for s in out["steps"] if s["ok"]]
    assert (
        "wait until decode is ready (/health 200)" in titles
    )  # health passed; only the probe caught it
    assert any(e.get("event") == "transfer_failed" for e in read_events(baseline_running))
    assert_baseline_restored(baseline_running, capsys)


def test_second_concurrent_deploy_fails_at_once_naming_the_holder(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    started = threading.Event()
    result: dict[str, Outcome] = {}

    def progress(line: str) -> None:
        if "start prefill" in line:
            started.set()

    t = threading.Thread(
        target=lambda: result.update(out=deploy_via_operator(env, "baseline", progress=progress))
    )
    t.start()
    try:
        assert started.wait(60)
        t0 = time.monotonic()
        code, _, err = cli(env, capsys, "deploy", "buckets-step4", "--yes", "--no-canary")
        assert code == 1 and time.monotonic() - t0 < 10
        assert "deploy lock" in err and f"pid {os.getpid()}" in err and "'test'" in err
    finally:
        t.join(120)
    assert result["out"].ok, result["out"].message
    assert_baseline_restored(env, capsys)


def test_cli_killed_mid_deploy_then_next_command_resolves(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "deploy",
            "buckets-step4",
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
    assert proc.stdout is not None  # stdout=PIPE
    try:
        for line in proc.stdout:
            if "ok" in line and "start decode" in line:
                proc.kill()
                break
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    code, st, _ = cli(env, capsys, "status", "--json")
    assert not st["healthy"]
    assert any(
        # killed right after 'start decode': the journal names it, or the wait it had begun
        "buckets-step4 was interrupted" in a and "decode" in a and "--recover" in a
        for a in st["attention"]
    ), st["attention"]
    assert st["lock"]["stale"]
    # The half-started workers are the interrupted operation's, not "restarted outside dsv4ops".
    assert not any("restarted outside dsv4ops" in d for d in st["drift"]), st["drift"]
    assert any(
        d.startswith("prefill (pid")
        and "started by deploy" in d
        and "buckets-step4" in d
        and "interrupted" in d
        for d in st["drift"]
    ), st["drift"]

    code, _, err = cli(env, capsys, "deploy", "baseline", "--yes", "--no-canary")
    assert code == 1 and "dead process" in err and "--recover" in err

    code, out, err = cli(env, capsys, "rollback", "--recover", "--yes", "--json")
    assert code == 0, err
    assert out["profile"] == "baseline"
    assert any("ABANDONED" in n or "interrupted" in n for n in out["notes"])
    ops = Journal(env.target).operations()
    killed = [o for o in ops if o.profile_name == "buckets-step4"][-1]
    assert killed.status is Status.ABANDONED and "interrupted" in (killed.message or "")
    assert_baseline_restored(env, capsys)


def test_decode_is_never_restarted_alone(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    before = {e["pid"] for e in read_events(env) if e.get("event") == "started"}
    mark = len(read_events(env))
    code, out, err = cli(
        env, capsys, "deploy", "baseline", "--only", "decode", "--yes", "--no-canary"
    )
    assert code == 0, err
    assert "bootstrap" in out and "restarting the pair instead" in out
    events = read_events(env)[mark:]
    order = [
        (e["role"], e["event"])
        for e in events
        if e.get("event") in ("started", "ready", "shutdown")
    ]
    # The prefill went down and came back before the new decode started: never a fresh decode
    # against a long-running prefill.
    assert order.index(("prefill", "shutdown")) < order.index(("prefill", "started"))
    assert order.index(("prefill", "ready")) < order.index(("decode", "started"))
    started = [e for e in events if e.get("event") == "started"]
    assert {e["role"] for e in started} == {"prefill", "decode"} and not (
        {e["pid"] for e in started} & before
    )
    assert not any(e.get("event") == "degraded" for e in events)
    assert_baseline_restored(env, capsys)
