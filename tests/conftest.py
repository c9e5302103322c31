from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No DSV4OPS_* leaks in from the caller; operator state goes to a temp dir, never ~ or cwd."""
    for key in list(os.environ):
        if key.startswith("DSV4OPS_"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(tmp_path_factory.mktemp("state")))
