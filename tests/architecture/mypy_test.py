"""mypy with the project's config ([tool.mypy] in pyproject.toml) passes on the package, and on
the test doubles of the orchestrator's target seam (they must satisfy `TargetControl`).

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


needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (it is in the dev extra: pip install -e '.[dev]')",
)


def _mypy(*files: str) -> subprocess.CompletedProcess[str]:
    key = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"dsv4ops-mypy-cache-{key}"
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(cache), "--no-color-output", "--no-error-summary", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False,
    )


@needs_mypy
def test_mypy_passes_with_the_project_config() -> None:
    proc = _mypy()
    assert proc.returncode == 0, f"mypy found type errors:\n{proc.stdout}{proc.stderr}"


# A test double of the orchestrator's target seam says so with a function returning it as a
# `TargetControl`; mypy then checks that it satisfies the protocol the real Supervisor does.
DOUBLE_MARK = "-> TargetControl:"


@needs_mypy
def test_the_target_control_doubles_satisfy_the_protocol() -> None:
    doubles = sorted(
        str(p.relative_to(ROOT))
        for top in ("tests", "testing")
        for p in (ROOT / top).rglob("*.py")
        if DOUBLE_MARK in p.read_text(encoding="utf-8") and p.name != "mypy_test.py"
    )
    assert doubles, "no test double of TargetControl found (testing/orchestrate.py?)"
    proc = _mypy(*doubles)
    assert proc.returncode == 0, f"a test double breaks TargetControl:\n{proc.stdout}{proc.stderr}"
