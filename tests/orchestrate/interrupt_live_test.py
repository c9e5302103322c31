"""Ctrl-C and SIGTERM to the real CLI process mid-deploy (twin + the real sglang-router): the
interrupt is journaled, the deploy rolls back to the last known-good, the CLI exits 130; a
second Ctrl-C during that rollback leaves a state `status` names with the one command that
fixes it, and that command works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import UNKNOWN, Journal
from testing.orchestrate import OrchEnv, assert_baseline_restored, cli

pytestmark = [pytest.mark.slow, pytest.mark.router]


def _deploy_process(env: OrchEnv, profile: str) -> subprocess.Popen[str]:
    # Its own session, so a "terminal Ctrl-C" can go to the whole process group, as a shell's does.
    return subprocess.Popen(
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
        env={**os.environ, "DSV4OPS_READY_TIMEOUT_S": "60"},
        start_new_session=True,
    )


def _send(proc: subprocess.Popen[str], sig: int, *, group: bool) -> None:
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)


def _run_until(proc: subprocess.Popen[str], triggers: list[tuple[str, int]], group: bool) -> str:
    """Read the progress lines; send each signal when its line appears; return all output."""
    seen = []
    assert proc.stdout is not None  # stdout=PIPE
    try:
        for line in proc.stdout:
            seen.append(line)
            if triggers and triggers[0][0] in line:
                _send(proc, triggers.pop(0)[1], group=group)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return "".join(seen)


@pytest.mark.parametrize(
    ("sig", "group"), [(signal.SIGINT, True), (signal.SIGTERM, False)], ids=["ctrl-c", "sigterm"]
)
def test_an_interrupted_deploy_is_journaled_and_rolled_back(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str], sig: signal.Signals, group: bool
) -> None:
    env = baseline_running
    good = Journal(env.target).deployed()
    assert good is not None  # the baseline runs
    # The decode of this profile never gets ready: the signal lands in the wait for it.
    proc = _deploy_process(env, "decode-never-ready")
    text = _run_until(proc, [("ok     start decode", sig)], group)
    name = signal.Signals(sig).name
    assert proc.returncode == 130, text
    # In the decode's wait, or (the signal beat the CLI to it) right after the start it finished.
    assert (
        f"interrupted by {name} during 'wait until decode is ready" in text
        or f"interrupted by {name} after 'start decode'" in text
    ), text
    assert "Running now: baseline" in text, text
    op = [o for o in Journal(env.target).operations() if o.profile_name == "decode-never-ready"][-1]
    assert op.status is Status.ROLLED_BACK and op.running == good.op, op
    assert f"interrupted by {name}" in (op.message or "")
    assert_baseline_restored(env, capsys)  # serving, no lock, nothing in flight, no strays


def test_a_second_ctrl_c_during_the_rollback_leaves_a_state_status_names(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    proc = _deploy_process(env, "decode-never-ready")
    text = _run_until(
        proc,
        [("ok     start decode", signal.SIGINT), ("ok     start prefill", signal.SIGINT)],
        group=True,
    )
    assert proc.returncode == 130, text
    assert "The automatic rollback was interrupted too (SIGINT" in text, text
    op = [o for o in Journal(env.target).operations() if o.profile_name == "decode-never-ready"][-1]
    assert op.status is Status.FAILED and op.running == UNKNOWN, op

    code, st, _ = cli(env, capsys, "status", "--json")
    assert not st["healthy"] and st["lock"] is None
    fix = [a for a in st["attention"] if f"`dsv4ops rollback --target {env.target}`" in a]
    assert fix and "interrupted" in fix[0], st["attention"]
    assert not any("restarted outside dsv4ops" in d for d in st["drift"]), st["drift"]

    code, out, err = cli(env, capsys, "rollback", "--yes", "--json")  # the one command named
    assert code == 0, err
    assert out["profile"] == "baseline"
    assert_baseline_restored(env, capsys)


def test_stop_while_a_deploy_is_in_its_middle_phase_is_refused_naming_it(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 21: `stop` issued while a deploy waits for its new decode (prefill started, decode
    starting) is refused at once by the deploy lock, naming the deploy and its pid; nothing is
    stopped, and the deploy then ends on its own terms (here: Ctrl-C, rolled back)."""
    env = baseline_running
    proc = _deploy_process(env, "decode-never-ready")
    seen: list[str] = []
    refused: tuple[int, str, str] | None = None
    assert proc.stdout is not None  # stdout=PIPE
    try:
        for line in proc.stdout:
            seen.append(line)
            if refused is None and "ok     start decode" in line:
                deploy = [o for o in Journal(env.target).in_flight()][-1]
                refused = cli(env, capsys, "stop", "--yes")
                assert proc.poll() is None  # the deploy is still in its middle phase
                os.killpg(proc.pid, signal.SIGINT)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert refused is not None, "".join(seen)
    code, out, err = refused
    assert code == 1, (out, err)
    assert "deploy lock" in err and str(proc.pid) in err and deploy.op in err, err
    stops = [o for o in Journal(env.target).operations() if o.kind.value == "stop"]
    assert stops == []  # a refusal by the lock journals nothing and stops nothing
    assert proc.returncode == 130, "".join(seen)
    assert_baseline_restored(env, capsys)
