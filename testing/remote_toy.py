"""Helpers for the supervisor tests around the toy component (testing/remote_toy_server.py): its
argv, waiting for a line in its log, and the teardown that kills every process group started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import testing.remote_toy_server

TOY = str(Path(testing.remote_toy_server.__file__).resolve())


def toy_argv(*args: object) -> tuple[str, ...]:
    """argv that starts the toy component with this interpreter."""
    return (sys.executable, "-I", "-S", TOY, *map(str, args))


def wait_for_log_line(workdir: Path, name: str, text: str, within_s: float = 15.0) -> None:
    """Block until the component's log (on this machine for both executors) contains `text`."""
    log = workdir / "logs" / f"{name}.log"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return
        time.sleep(0.01)
    raise AssertionError(f"{text!r} not in {log} after {within_s}s")


def kill_recorded_groups(workdir: Path) -> None:
    """Teardown safety net: SIGKILL every process group a test started (no orphans)."""
    for rec in (workdir / "run").glob("*.json"):
        if rec.name.endswith(".exit.json"):
            continue
        with contextlib.suppress(ValueError, OSError):
            pgid = json.loads(rec.read_text()).get("pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
