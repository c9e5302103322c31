from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from testing.kernels_artifacts import Built


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
