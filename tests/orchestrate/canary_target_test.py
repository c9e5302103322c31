"""`dsv4ops canary --target T` finds the deployed pair (router + workers) from the journal."""

from __future__ import annotations

import pytest

from testing.orchestrate import OrchEnv, cli

pytestmark = pytest.mark.slow


def test_canary_against_the_deployed_target(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal's record of the deployment (with its canary thresholds) drives the canary."""
    code, report, err = cli(
        baseline_running, capsys, "canary", "--suite", "smoke", "--duration", "3", "--json"
    )
    assert code == 0, err
    assert report["suite"] == "smoke" and report["verdict"] == "PASS", report
    summary = report["metrics"]["summary"]
    assert summary["completed"] >= 1 and summary["failed"] == 0, summary
    assert report["metrics"]["hangs"]["hangs_by_kind"] in ({}, None) or not any(
        report["metrics"]["hangs"]["hangs_by_kind"].values()
    )
