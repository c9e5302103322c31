"""`dsv4ops --help` and `dsv4ops profile render` stay light: no fabric, aiohttp, httpx, torch, triton, rich."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# rich: the live line of a long step (cli/_live.py) loads it only when a step outlasts 2 s
HEAVY = ("fabric", "paramiko", "aiohttp", "httpx", "torch", "triton", "rich")

_PROBE = """
import json, sys
from dsv4ops.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print("\\nMODULES=" + json.dumps(sorted(m for m in sys.modules)))
"""


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["profile", "render", "baseline", "--json"], ["profile", "validate", "baseline"]],
)
def test_light_commands_do_not_import_heavy_packages(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout.rsplit("MODULES=", 1)[1])
    loaded = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert loaded == []
    assert "click" in modules  # the probe really ran the CLI
