"""A long step shows what it is doing while it does it (issue 23, item 1): a live line on a
terminal, a plain line every few seconds on stderr off one (CI, `| tee`, --json).

One twin unit whose model load takes ~5 s of wall time (100 model s at the test scale 0.05): the
prefill's readiness wait is the step that must be seen."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from testing.cli import run_in_pty
from testing.orchestrate import OrchEnv, module_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slow_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    yield from module_env(tmp_path_factory, extra_twin_env={"DSV4_TWIN_MODEL_LOAD_S": "100"})


def _environ(env: OrchEnv, **extra: str) -> dict[str, str]:
    return {**os.environ, **env.environ, **extra}


def test_on_a_terminal_the_ready_wait_is_a_live_line_that_is_cleared(slow_env: OrchEnv) -> None:
    code, out = run_in_pty(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "deploy",
            "baseline",
            "--yes",
            "--no-canary",
            "--target",
            slow_env.target,
        ],
        env=_environ(slow_env),
        cwd=slow_env.root,
        timeout_s=180,
    )
    assert code == 0, out[-3000:]
    # What it waits for, what the component last answered, the seconds so far and the bound:
    # the twin's HTTP port is closed while the weights load (as SGLang's is).
    live = re.findall(
        r"wait until prefill is ready[^\r\n\x1b]*: prefill /health [^\r\n\x1b]*"
        r", (\d+) s of \d+ s",
        out,
    )
    assert live, out[-3000:]
    assert max(int(s) for s in live) >= 3  # the line moved while the model loaded
    assert "\x1b[" in out  # drawn in place (cursor moves), not printed line after line
    # the step's own line follows once the live one is gone
    assert re.search(r"ok\s+wait until prefill is ready", out)


def test_off_a_terminal_and_with_json_it_is_a_plain_line_on_stderr(slow_env: OrchEnv) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", "stop", "--yes", "--json", "--target", slow_env.target],
        capture_output=True,
        text=True,
        env=_environ(slow_env),
        cwd=slow_env.root,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "deploy",
            "baseline",
            "--yes",
            "--no-canary",
            "--json",
            "--target",
            slow_env.target,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=_environ(slow_env, DSV4OPS_PROGRESS_EVERY_S="1"),
        cwd=slow_env.root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = [
        line
        for line in proc.stderr.splitlines()
        if re.fullmatch(r"wait until prefill is ready.*: prefill /health .*, \d+ s of \d+ s", line)
    ]
    assert len(plain) >= 2, proc.stderr[-3000:]  # one a second while the weights load
    assert "\x1b" not in proc.stderr and "\r" not in proc.stderr
    assert proc.stdout.lstrip().startswith("{")  # stdout stays the JSON alone
