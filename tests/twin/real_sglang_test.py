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
from tools.twin_conformance.live import LOG_INTERVAL, diff, probe

ROOT = Path(__file__).resolve().parents[2]
ENV_DIR = Path(os.environ.get("REAL_SGLANG") or ROOT / ".dsv4ops" / "sglang-cpu")
READY = ENV_DIR / ".ready"
# serve.sh's arguments (the twin takes SGLang's), so both report the same server_args
ARGS = [
    "--device",
    "cpu",
    "--attention-backend",
    "torch_native",
    "--sampling-backend",
    "pytorch",
    "--enable-metrics",
    "--max-total-tokens",
    "4096",
    "--max-running-requests",
    "16",
    "--disable-cuda-graph",
    "--tool-call-parser",
    "qwen",
    "--decode-log-interval",
    str(LOG_INTERVAL),
]

pytestmark = [
    pytest.mark.real_sglang,
    pytest.mark.skipif(
        os.environ.get("REAL_SGLANG") is None or not READY.is_file(),
        reason=f"needs the real-SGLang env: `make test-real-sglang` builds it "
        f"({ENV_DIR}, ~6.5 GB) and starts one real server (~100 s)",
    ),
]


def _code(url: str) -> int:
    try:
        return httpx.get(url, timeout=25).status_code
    except httpx.HTTPError:
        return 0  # no answer (not listening yet, or no answer in time)


def _wait_up(proc: Proc, timeout: float) -> list[list[int]]:
    """[/health, /health_generate] codes seen through start-up (0: no answer), each pair once,
    in order, until both answer 200."""
    seen: list[list[int]] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.alive(), proc.log_tail(60)
        pair = [_code(proc.url + "/health"), _code(proc.url + "/health_generate")]
        if not seen or seen[-1] != pair:
            seen.append(pair)
        if pair == [200, 200]:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"no /health 200 within {timeout:.0f} s:\n{proc.log_tail(60)}")


def _phases(pairs: list[list[int]]) -> dict[str, list[int]]:
    """Each endpoint's codes through start-up, each run once: e.g. [0, 503, 200]."""
    out: dict[str, list[int]] = {}
    for name, i in (("health", 0), ("health_generate", 1)):
        seq: list[int] = []
        for pair in pairs:
            if not seq or seq[-1] != pair[i]:
                seq.append(pair[i])
        out[name] = seq
    return out


def test_the_twin_answers_in_the_shapes_real_sglang_answers() -> None:
    out = ENV_DIR / "last-run"  # kept after the run: the real server's log and both shapes
    out.mkdir(exist_ok=True)
    (port,) = free_ports(1)
    real = Proc(
        "real-sglang",
        [
            "bash",
            str(ROOT / "tools/sglang-cpu/serve.sh"),
            str(ENV_DIR),
            str(port),
            "--decode-log-interval",
            str(LOG_INTERVAL),
        ],
        dict(os.environ),
        port,
        out / "real.log",
    )
    real.start()
    try:
        startup = _wait_up(real, 600)
        real_shapes = probe(real.url, "please finish", "hello")
    finally:
        end_all([real])  # SIGTERM the group, SIGKILL after the grace: no orphan either way
    assert not real.alive()
    # the twin's own start-up phases (fast=False), its 60 s model load cut to 5 s
    with twin_server(
        [*ARGS, "--served-model-name", "m"],
        fast=False,
        wait=False,
        env={"DSV4_TWIN_MODEL_LOAD_S": "5"},
    ) as twin:
        twin_startup = _wait_up(twin, 600)
        twin_shapes = probe(twin.url, "SAY Hello world from the twin check", "write on")
    # per endpoint: the two are polled one after the other, so a pair like [503, 200] is only
    # the moment the status flipped between the two requests (both are one handler in 0.5.23)
    real_shapes["startup.health"] = _phases(startup)
    twin_shapes["startup.health"] = _phases(twin_startup)
    (out / "shapes.json").write_text(
        json.dumps({"twin": twin_shapes, "real": real_shapes}, indent=1)
    )
    problems = diff(twin_shapes, real_shapes)
    assert problems == [], "\n".join([*problems, f"(both shapes: {out / 'shapes.json'})"])
