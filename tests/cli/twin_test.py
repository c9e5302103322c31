"""`dsv4ops twin hazard`: refused plainly on a real target and before anything is deployed (the
force path runs in every rehearsal of tests/cli/runbook_rehearsal_test.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.cli import main
from testing.orchestrate import add_real_box, make_env


def test_hazard_switch_only_on_a_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    add_real_box(env)
    assert main(["twin", "hazard", "wedge", "--state", "force", "--target", "box"]) == 1
    err = capsys.readouterr().err
    assert (
        "target 'box' runs real SGLang (launcher 'sglang'): twin hazards can be forced only "
        "on a twin target. Nothing was sent." in err
    )
    assert "Traceback" not in err
    assert main(["twin", "hazard", "degrade", "--state", "force", "--target", env.target]) == 1
    assert "the journal records no running deployment on 'twin-test'" in capsys.readouterr().err
    assert main(["twin", "hazard", "melt", "--state", "force", "--target", env.target]) == 1
    assert "'melt' is not one of 'degrade', 'wedge', 'corrupt'" in capsys.readouterr().err
