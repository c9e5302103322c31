"""Fixtures of the CLI verb tests: the module-scoped twin environment of tests/orchestrate, the SSH
server of tests/remote (the session-scoped kernel artifacts `built` come from tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.orchestrate import OrchEnv, make_env
from tests.orchestrate.conftest import (  # noqa: F401 - one twin environment per module
    baseline_running,
    env,
    orch_env,
)


@pytest.fixture
def fresh_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    """A twin environment of the test's own where nothing runs, the CLI pointed at it and at its
    target (DSV4OPS_TARGET): for tests that write a journal by hand and read it through a verb."""
    e = make_env(tmp_path)
    for k, v in e.environ.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DSV4OPS_TARGET", e.target)
    return e
