from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from testing.kernels_artifacts import Built
    from testing.remote_sshd import SshdServer


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No DSV4OPS_* leaks in from the caller; operator state goes to a temp dir, never ~ or cwd."""
    for key in list(os.environ):
        if key.startswith("DSV4OPS_"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """Two real kernel artifacts, built once per session (tests/kernels and tests/cli/kernels_test
    share it; the interpreter run is the slow part)."""
    pytest.importorskip("torch")
    from testing.kernels_artifacts import build_pair

    yield build_pair(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    """A real OpenSSH server on 127.0.0.1, one for the whole session (testing/remote_sshd.py):
    tests/remote, tests/orchestrate, tests/cli and tests/kernels share it."""
    import shutil

    from testing.remote_sshd import ensure_sshd_installed, running_sshd

    if shutil.which("ssh-keygen") is None:
        ensure_sshd_installed()
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
