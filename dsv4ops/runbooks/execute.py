"""The real runbook executor: each command is a child `python -m dsv4ops ...`, argv only.

No shell, so nothing in a runbook line is interpreted. The child writes straight to this
process's stdout/stderr (its output streams as it comes, colours and all) and shares the process
group, so Ctrl-C reaches it too: it handles the interrupt its own way (a deploy journals where it
stopped) and this process waits for it before stopping. Its stdin is closed: the runbook asks
every question itself, and a prompt nobody foresaw aborts instead of hanging. Under
`runbook run --json` the child's stdout goes to this process's stderr: stdout carries only the
run's one JSON object.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

from dsv4ops.errors import Terminated
from dsv4ops.runbooks.parse import PROGRAM

INTERRUPT_GRACE_S = 60.0  # how long a child may take to finish after Ctrl-C before it is killed


def child_argv(argv: Sequence[str]) -> list[str]:
    """`dsv4ops a b` -> [this interpreter, -m, dsv4ops, a, b]: the same dsv4ops as the runbook's."""
    if not argv or argv[0] != PROGRAM:
        raise ValueError(f"not a dsv4ops command: {list(argv)!r}")
    return [sys.executable, "-m", "dsv4ops", *argv[1:]]


def execute(argv: Sequence[str], env: Mapping[str, str], *, stdout_to_stderr: bool = False) -> int:
    """Run one runbook command to completion; return its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    proc = subprocess.Popen(
        child_argv(argv),
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=2 if stdout_to_stderr else None,
    )  # fd 2: this stderr
    try:
        return proc.wait()
    except KeyboardInterrupt as exc:
        # A terminal's Ctrl-C reached the child's process group already; a SIGTERM sent to this
        # process alone did not: the child deploy is told the same, to roll back as it would.
        if isinstance(exc, Terminated):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
