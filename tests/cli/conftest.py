"""Fixtures of the CLI verb tests: the module-scoped twin environment of tests/orchestrate, the SSH
server of tests/remote (the session-scoped kernel artifacts `built` come from tests/conftest.py)."""

from __future__ import annotations

from tests.orchestrate.conftest import (  # noqa: F401 - one twin environment per module
    baseline_running,
    env,
    orch_env,
)
