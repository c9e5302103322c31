"""Issue 40 item 1: a stray line on the local agent's wire while a deploy waits for decode (a
line on its stdout, garbage on its stdin) is that wait's transport failure: the deploy rolls
back, says so and what runs now, exits FAILED (not BUG) and leaves the deploy lock released.
The target's python is testing/programs/remote_wire_tamper.py in front of the real agent
session (local executor, twin + real router)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops import exitcodes
from testing.orchestrate import OrchEnv, assert_baseline_restored, cli, module_env
from testing.remote import tamper_once, tampering_python

pytestmark = [pytest.mark.slow, pytest.mark.router]


@pytest.fixture(scope="module")
def python_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("target-python")


@pytest.fixture(scope="module")
def orch_env(tmp_path_factory: pytest.TempPathFactory, python_dir: Path) -> Iterator[OrchEnv]:
    """This module's twin environment, its target's python in front of the agent."""
    yield from module_env(tmp_path_factory, python=tampering_python(python_dir))


@pytest.mark.parametrize(
    ("to", "line"),
    [
        # what the issue saw: another call's reply read as the wait's (KeyError: 'elapsed_s')
        ("stdout", json.dumps({"ok": True, "result": {"released": True}})),
        ("stdin", "garbage"),
    ],
    ids=["another-reply-on-stdout", "garbage-on-stdin"],
)
def test_a_stray_line_while_waiting_for_decode_rolls_the_deploy_back(
    baseline_running: OrchEnv,
    python_dir: Path,
    capsys: pytest.CaptureFixture[str],
    to: str,
    line: str,
) -> None:
    env = baseline_running
    once = tamper_once(python_dir, "wait_http", to, line, name="decode")
    code, _, err = cli(env, capsys, "deploy", "buckets-step4", "--yes", "--no-canary")
    assert once.exists(), "the deploy never waited for decode"
    assert code == exitcodes.FAILED, err
    assert "Traceback" not in err and "KeyError" not in err
    assert "wait until decode is ready" in err
    assert "not the answer to this request" in err  # what failed
    assert "Rolled back automatically" in err and "Running now: baseline" in err  # the state
    assert_baseline_restored(env, capsys)  # healthy, no drift, the lock released
