"""A deploy that failed with nothing known-good to roll back to stops everything: what it prints
ends with the command that deploys again on that target (no --recover is needed: the operation
ended). Through the CLI against a fresh twin target."""

from __future__ import annotations

import pytest

from dsv4ops.cli import main
from testing.orchestrate import OrchEnv, kill_all, our_processes


def test_a_failed_deploy_with_nothing_known_good_says_how_to_deploy_again(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    t = fresh_target.target
    try:
        code = main(["deploy", "router-broken", "--target", t, "--yes", "--no-canary"])
    finally:
        kill_all(fresh_target)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Running now: nothing" in err, err
    assert f"`dsv4ops deploy router-broken --target {t}`" in err, err
    assert our_processes(fresh_target) == []
