from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import testing.remote_toy_server
from dsv4ops.remote import Executor, LocalExecutor, Supervisor
from testing.remote_sshd import sshd  # noqa: F401 - session fixture used by the SSH tests

TOY = str(Path(testing.remote_toy_server.__file__).resolve())


def toy_argv(*args: object) -> tuple[str, ...]:
    """argv that starts the toy component with this interpreter."""
    return (sys.executable, "-I", "-S", TOY, *map(str, args))


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex: Executor = (
        LocalExecutor() if request.param == "local" else request.getfixturevalue("sshd").executor()
    )
    yield ex
    ex.close()


def wait_for_log_line(workdir: Path, name: str, text: str, within_s: float = 15.0) -> None:
    """Block until the component's log (on this machine for both executors) contains `text`."""
    log = workdir / "logs" / f"{name}.log"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return
        time.sleep(0.01)
    raise AssertionError(f"{text!r} not in {log} after {within_s}s")


def _kill_recorded_groups(workdir: Path) -> None:
    """Teardown safety net: SIGKILL every process group a test started (no orphans)."""
    for rec in (workdir / "run").glob("*.json"):
        if rec.name.endswith(".exit.json"):
            continue
        with contextlib.suppress(ValueError, OSError):
            pgid = json.loads(rec.read_text()).get("pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    wd = tmp_path / "wd"
    yield wd
    _kill_recorded_groups(wd)


@pytest.fixture
def sup(executor: Executor, workdir: Path) -> Supervisor:
    return Supervisor(executor, str(workdir), python=sys.executable)


@pytest.fixture
def local_sup(workdir: Path) -> Supervisor:
    """For agent behaviour that does not depend on the transport (the SSH path is the same agent)."""
    return Supervisor(LocalExecutor(), str(workdir), python=sys.executable)
