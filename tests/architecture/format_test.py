"""The tree is as `ruff format` leaves it ([tool.ruff.format] in pyproject.toml): the check
`make lint` runs, here so that CI (`make test`) has it too.

The same directories as `make format`; ruff reads the project's config from the repository root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")
DIRS = ("dsv4ops", "tests", "testing", "benchmarks", "tools", "integration")


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed (it is in the dev extra)")
def test_the_tree_is_ruff_formatted() -> None:
    proc = subprocess.run(
        [str(RUFF), "format", "--check", "--no-cache", *DIRS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, (
        "not formatted (run `make format`):\n" + (proc.stdout + proc.stderr)[-4000:]
    )
