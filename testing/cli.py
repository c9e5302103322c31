"""Test helpers and doubles for `dsv4ops.cli` (one module per package area).

- process: Run `python -m dsv4ops ...` as a real process with a time and memory ceiling.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# --- process (was testing/cli.py) ---

REPO = Path(__file__).resolve().parents[1]

# Far above what any command needs on a profile (about 60 MB), far below what an unbounded alias
# expansion reaches (5 GB after 40 s on the alias bomb of issue 11).
MEMORY_CEILING_BYTES = 1024 * 2**20
# Generous for a loaded 2-core CI machine: a profile command takes well under a second.
TIME_CEILING_S = 60


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING_BYTES, MEMORY_CEILING_BYTES))


def run_cli(*args: str, profiles_dir: Path, cwd: Path | None = None) -> Run:
    """The real CLI process; fails the test (TimeoutExpired) if it runs past TIME_CEILING_S."""
    env = {**os.environ, "DSV4OPS_PROFILES_DIR": str(profiles_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or profiles_dir.parent,
        timeout=TIME_CEILING_S,
        preexec_fn=_limit_memory,  # noqa: PLW1509 - no threads in the test process at this point
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)
