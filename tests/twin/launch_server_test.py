"""A lone twin process: unified mode, kernel packages and the start-up log."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from dsv4ops.kernels.plugin_dist import plugin_members
from dsv4ops.sglang_paths import dsv4_flash_config_names, plugin_env
from dsv4ops.twin.kernel_package import BOX_DEVICE_NAME
from testing.twin import twin_server

pytestmark = pytest.mark.slow


def test_unified_mode_serves_without_a_prefill_and_reports_a_kernel_package(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    up = dsv4_flash_config_names(BOX_DEVICE_NAME)[0]
    (pkg / "configs" / "triton_3_8_0").mkdir(parents=True)
    (pkg / "configs" / "triton_3_8_0" / up).write_text("{}")
    (pkg / "manifest.json").write_text(json.dumps({"name": "dsv4-moe", "version": "2"}))
    for rel, data in plugin_members("dsv4-moe", "2").items():  # the plugin distribution, installed
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_bytes(data)
    env = {
        **plugin_env("dsv4-moe", str(pkg)),
        "DSV4_TWIN_TIME_SCALE": "0.05",
        "SGLANG_DSV4_FP4_DEQUANT": "1",
        "SGLANG_ENABLE_JIT_DEEPGEMM": "0",
    }
    with twin_server(
        ["--enable-metrics", "--mem-fraction-static", "0.85"], env=env, workdir=tmp_path
    ) as proc:
        r = httpx.post(
            f"{proc.url}/v1/chat/completions",
            timeout=10,
            json={"messages": [{"role": "user", "content": "SAY unified ok"}]},
        )
        assert r.json()["choices"][0]["message"]["content"] == "unified ok"
        info = httpx.get(f"{proc.url}/server_info").json()
        assert info["disaggregation_mode"] == "null"
        assert info["twin_kernel_package"] == {"name": "dsv4-moe", "version": "2", "dir": str(pkg)}
        state = httpx.get(f"{proc.url}/_twin/state").json()
        assert state["role"] == "unified" and state["twin_kernel_package"]["version"] == "2"
        assert "--mem-fraction-static" in state["ignored_args"]
    log = (tmp_path / "twin.log").read_text()
    assert f"Using MoE kernel config from {pkg}/configs/triton_3_8_0/{up}." in log
    assert "[dsv4ops-kernel-plugin] loaded dsv4-moe 2 pid=" in log
    assert "Loaded plugin" not in log  # SGLang's INFO line is lost before logging is set up
    assert "twin: accepting and ignoring --mem-fraction-static" in log
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events][:2] == ["started", "ready"]
    assert events[-1]["event"] == "shutdown"  # SIGTERM on exit shuts down cleanly


def test_forced_wedge_at_start_makes_health_fail() -> None:
    env = {"DSV4_TWIN_FORCE": "wedge", "DSV4_TWIN_TIME_SCALE": "0.05"}
    with twin_server(["--disaggregation-mode", "decode"], env=env, wait=False) as proc:
        import time

        from testing.twin import http_status

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and http_status(proc.url + "/ready") != 200:
            time.sleep(0.05)
        assert http_status(proc.url + "/ready") == 200
        assert http_status(proc.url + "/health", timeout=10) == 503
