"""The live conformance run against real SGLang 0.5.23 (`make test-real-sglang`).

Starts one real server on CPU (tools/sglang-cpu/serve.sh: unified mode, the tiny model, ~3.5 GB,
~100 s) and one twin with the same arguments, runs the same probes against both
(tools/twin_conformance/live.py) and fails on any difference that `EXPLAINED` (and docs/twin.md,
"Measured against the real server") does not give a reason for. Skipped, saying why, unless
REAL_SGLANG names a built env (`make real-sglang`), so `make test` never starts a real server.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from testing.ports import free_ports
from testing.twin import Proc, end_all, twin_server
from tools.twin_conformance.live import diff, probe

ROOT = Path(__file__).resolve().parents[2]
ENV_DIR = Path(os.environ.get("REAL_SGLANG") or ROOT / ".dsv4ops" / "sglang-cpu")
READY = ENV_DIR / ".ready"
# serve.sh's arguments (the twin takes SGLang's), so both report the same server_args
ARGS = ["--device", "cpu", "--attention-backend", "torch_native", "--sampling-backend",
        "pytorch", "--enable-metrics", "--max-total-tokens", "4096", "--max-running-requests",
        "16", "--disable-cuda-graph", "--tool-call-parser", "qwen"]

pytestmark = [
    pytest.mark.real_sglang,
    pytest.mark.skipif(os.environ.get("REAL_SGLANG") is None or not READY.is_file(),
                       reason=f"needs the real-SGLang env: `make test-real-sglang` builds it "
                              f"({ENV_DIR}, ~6.5 GB) and starts one real server (~100 s)"),
]


def _wait_up(proc: Proc, timeout: float) -> list[int]:
    """/health codes seen through start-up (0: no answer), each once, in order."""
    seen: list[int] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.alive(), proc.log_tail(60)
        try:
            code = httpx.get(proc.url + "/health", timeout=5).status_code
        except httpx.HTTPError:
            code = 0
        if not seen or seen[-1] != code:
            seen.append(code)
        if code == 200:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"no /health 200 within {timeout:.0f} s:\n{proc.log_tail(60)}")


def test_the_twin_answers_in_the_shapes_real_sglang_answers() -> None:
    out = ENV_DIR / "last-run"  # kept after the run: the real server's log and both shapes
    out.mkdir(exist_ok=True)
    (port,) = free_ports(1)
    real = Proc("real-sglang", ["bash", str(ROOT / "tools/sglang-cpu/serve.sh"), str(ENV_DIR),
                                str(port)], dict(os.environ), port, out / "real.log")
    real.start()
    try:
        startup = _wait_up(real, 600)
        real_shapes = probe(real.url, "please finish", "hello")
    finally:
        end_all([real])  # SIGTERM the group, SIGKILL after the grace: no orphan either way
    assert not real.alive()
    with twin_server([*ARGS, "--served-model-name", "m"]) as twin:
        twin_shapes = probe(twin.url, "SAY Hello world from the twin check", "write on")
    # start-up: no answer, then straight to 200 (no 503 phase was seen on the real server)
    assert startup[0] == 0 and startup[-1] == 200, startup
    (out / "shapes.json").write_text(json.dumps({"twin": twin_shapes, "real": real_shapes},
                                                     indent=1))
    problems = diff(twin_shapes, real_shapes)
    assert problems == [], "\n".join([*problems, f"(both shapes: {out / 'shapes.json'})"])
