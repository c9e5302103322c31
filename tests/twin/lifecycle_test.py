"""Start-up and SIGTERM as in SGLang 0.5.23: the order the ports open, and the graceful path."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from testing.ports import free_ports
from testing.twin import http_status, twin_server

pytestmark = pytest.mark.slow
SCALE = 0.05


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_prefill_bootstrap_server_answers_before_the_http_port_which_opens_after_capture(
    tmp_path: Path,
) -> None:
    (boot,) = free_ports(1)
    # 40 model s of load and 40 of warmup at scale 0.05: two wall seconds each
    env = {
        "DSV4_TWIN_TIME_SCALE": str(SCALE),
        "DSV4_TWIN_MODEL_LOAD_S": "40",
        "DSV4_TWIN_WARMUP_S": "40",
    }
    with twin_server(
        ["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", str(boot)],
        env=env,
        workdir=tmp_path,
        wait=False,
    ) as proc:
        boot_url = f"http://127.0.0.1:{boot}"
        deadline = time.monotonic() + 30
        while http_status(boot_url + "/health") != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        # the model is loading: the bootstrap server is up, its ranks are not registered, and
        # the HTTP port is closed
        assert http_status(boot_url + "/health") == 200
        route = httpx.get(boot_url + "/route")
        assert route.status_code == 503 and "not fully registered" in route.text
        assert http_status(proc.url + "/health") == 0
        while http_status(proc.url + "/ready") == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        # port open after load and capture; ranks registered; warmup still running
        assert http_status(boot_url + "/route") == 200
        assert http_status(proc.url + "/health") == 503
        assert http_status(proc.url + "/ready") == 503
        while http_status(proc.url + "/health") != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert http_status(proc.url + "/health") == 200
    log = (tmp_path / "twin.log").read_text()
    assert (
        log.index("Bootstrap server started")
        < log.index("Load weight begin")
        < log.index("fired up and ready")
    )


def _stream(url: str, out: dict[str, Any]) -> None:
    body = {
        "messages": [{"role": "user", "content": "long answer"}],
        "max_tokens": 200,
        "stream": True,
    }
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as r:
        out["status"] = r.status_code
        out["lines"] = [x for x in r.iter_lines() if x.startswith("data: ")]
    out["ended_at"] = time.monotonic()


def test_sigterm_drains_in_flight_requests_then_gives_the_schedulers_their_time(
    tmp_path: Path,
) -> None:
    # a stream of 200 steps of 100 ms: 20 model s, 1 s wall; scheduler exit 10 model s, 0.5 s
    env = {
        "DSV4_TWIN_TIME_SCALE": str(SCALE),
        "DSV4_TWIN_SCHEDULER_EXIT_S": "10",
        "DSV4_TWIN_SIGTERM_TICK_S": "5",
        "DSV4_TWIN_STEP_A_MS": "100",
    }
    with twin_server([], env=env, workdir=tmp_path) as proc:
        assert proc.popen is not None and proc.pid is not None  # started (not wait=False)
        out: dict[str, Any] = {}
        t = threading.Thread(target=_stream, args=(proc.url, out))
        t.start()
        deadline = time.monotonic() + 10
        while not httpx.get(f"{proc.url}/_twin/state").json()["inflight_rids"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)  # the server process only, as SGLang expects
        time.sleep(0.05)
        assert http_status(proc.url + "/health") == 503  # shutting down
        assert http_status(proc.url + "/ready") == 503
        # the port stays open and a new request is still served while it drains
        r = httpx.post(
            f"{proc.url}/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=30
        )
        assert r.status_code == 200
        t.join(30)
        assert out["status"] == 200 and out["lines"][-1] == "data: [DONE]"
        proc.popen.wait(30)
        exited = time.monotonic()
    assert proc.popen.returncode == 0
    events = [e for e in _events(tmp_path / "events.jsonl")]
    names = [e["event"] for e in events]
    assert names.index("sigterm") < names.index("draining") < names.index("shutdown")
    drains = [e["remaining"] for e in events if e["event"] == "draining"]
    assert drains[0] >= 1 and drains[-1] == 0  # waited for the stream, not cut it
    assert events[-1]["event"] == "shutdown" and events[-1]["how"] == "graceful"
    # after the drain the schedulers got their exit time (10 model s = 0.5 s wall)
    assert exited - out["ended_at"] >= 10 * SCALE * 0.9
    assert exited - sent < 15  # and it did end by itself


def test_sigterm_while_the_last_health_check_failed_exits_at_once(tmp_path: Path) -> None:
    env = {
        "DSV4_TWIN_TIME_SCALE": str(SCALE),
        "DSV4_TWIN_FORCE": "wedge",
        "DSV4_TWIN_HEALTH_TIMEOUT_S": "4",
        "DSV4_TWIN_SCHEDULER_EXIT_S": "200",
    }
    with twin_server(
        ["--disaggregation-mode", "decode"], env=env, workdir=tmp_path, wait=False
    ) as proc:
        assert proc.popen is not None and proc.pid is not None  # started, not yet ready
        deadline = time.monotonic() + 20
        while http_status(proc.url + "/ready") != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert http_status(proc.url + "/health", timeout=10) == 503  # UnHealthy now
        os.kill(proc.pid, signal.SIGTERM)
        proc.popen.wait(10)
    shutdown = [e for e in _events(tmp_path / "events.jsonl") if e["event"] == "shutdown"]
    assert shutdown[-1]["how"] == "forced"
