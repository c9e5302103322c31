"""`make demo` says what it runs on (issue 23, item 6): the target's twin settings are printed
before anything runs, $DSV4OPS_TARGET chooses the target, and a port collision names the
target's `port_offset` to change."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from dsv4ops.profiles import load_targets
from testing.orchestrate import make_env

REPO = Path(__file__).resolve().parents[1]


def test_the_shipped_twin_fast_target_holds_the_demo_settings() -> None:
    fast = load_targets(REPO / "profiles" / "targets.yaml")["twin-fast"]
    env = dict(fast.twin_env)
    assert env["DSV4_TWIN_TIME_SCALE"] == "0.1" and env["DSV4_TWIN_MODEL_LOAD_S"] == "10"
    assert (
        fast.port_offset
        != load_targets(REPO / "profiles" / "targets.yaml")["twin-local"].port_offset
    )


def test_the_demo_prints_its_target_and_a_port_collision_names_port_offset(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    with socket.socket() as squatter:  # someone else's server on the unit's router port
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", env.port(8000)))
        squatter.listen()
        proc = subprocess.run(
            [sys.executable, "-m", "dsv4ops.demo"],
            cwd=env.root,
            env={**os.environ, **env.environ, "DSV4OPS_TARGET": env.target},
            capture_output=True,
            text=True,
            timeout=120,
        )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"target {env.target} ") and f"port_offset {env.offset}" in first
    assert "DSV4_TWIN_TIME_SCALE=0.05" in first and "HF_HUB_OFFLINE=1" in first
    assert "$ dsv4ops deploy baseline --yes" in out and f"--target {env.target}" in out
    assert f"port {env.port(8000)} is in use" in out
    assert f"change `port_offset` of target {env.target} in profiles/targets.yaml" in out
