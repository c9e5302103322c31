"""`dsv4ops kernels build` refusals, before any compile check (no kernels extra needed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dsv4ops.cli import main
from testing.orchestrate import OrchEnv


def test_kernels_build_into_an_impossible_directory_is_a_clear_error(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    t0 = time.monotonic()
    code = main(["kernels", "build", "--out", "/proc/nope", "--no-interpreter-check"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "--out /proc/nope: cannot create the output directory" in err
    assert "Traceback" not in err and "internal error" not in err
    assert time.monotonic() - t0 < 5  # refused before the compile checks, not after
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["kernels", "build", "--out", str(blocker / "sub"), "--no-interpreter-check"])
    assert code == 1 and "cannot create the output directory" in capsys.readouterr().err
