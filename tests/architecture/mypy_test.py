"""mypy with the project's config ([tool.mypy] in pyproject.toml) passes on the package.

This is how the type check runs in CI (CI runs `make test`); `make lint` runs the same command.
The cache lives in the system temp directory, keyed by the checkout, so a second run takes
seconds instead of the ~45 s of a cold one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (it is in the dev extra: pip install -e '.[dev]')",
)
def test_mypy_passes_with_the_project_config() -> None:
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"dsv4ops-mypy-cache-{key}"
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(cache), "--no-color-output", "--no-error-summary"],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False,
    )
    assert proc.returncode == 0, f"mypy found type errors:\n{proc.stdout}{proc.stderr}"
