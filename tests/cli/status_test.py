"""`dsv4ops status` without a running deployment: the router row says what it saw."""

from __future__ import annotations

import pytest

from dsv4ops.cli import main
from dsv4ops.cli.status import _router_details
from testing.orchestrate import OrchEnv


def test_status_says_the_router_is_not_running_instead_of_none(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing runs: NOT HEALTHY, and a script sees it (exit 2, not 0)."""
    code = main(["status", "--target", env.target])
    out = capsys.readouterr().out
    assert code == 2 and "NOT HEALTHY" in out.splitlines()[0]
    router = next(line for line in out.splitlines() if line.startswith("router"))
    assert "router not running" in router and "None" not in out


def test_status_readiness_detail_when_the_router_does_not_answer() -> None:
    row = {"name": "router", "alive": True, "readiness": None, "readiness_error": "timed out"}
    assert _router_details(row) == "readiness unreachable (timed out)"
    row = {"name": "router", "alive": True, "readiness": 200, "workers": []}
    assert _router_details(row) == "readiness 200; workers unknown"
