"""Fixtures of the remote tests: each executor (local, and ssh against a real OpenSSH server), a
work directory cleaned of process groups, the Supervisor on them (helpers: testing/remote.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.remote import Executor, LocalExecutor, Supervisor
from testing.remote import kill_recorded_groups


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex: Executor = (
        LocalExecutor() if request.param == "local" else request.getfixturevalue("sshd").executor()
    )
    yield ex
    ex.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    wd = tmp_path / "wd"
    yield wd
    kill_recorded_groups(wd)


@pytest.fixture
def sup(executor: Executor, workdir: Path) -> Supervisor:
    return Supervisor(executor, str(workdir), python=sys.executable)


@pytest.fixture
def local_sup(workdir: Path) -> Supervisor:
    """For agent behaviour that does not depend on the transport (the SSH path is the same agent)."""
    return Supervisor(LocalExecutor(), str(workdir), python=sys.executable)
