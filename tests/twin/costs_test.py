"""The twin's modelled costs: prefill time per prompt token and start-up (load + capture per bucket)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.twin import twin_server

# serial: model seconds measured from the client's clock (testing/workers.py)
pytestmark = [pytest.mark.slow, pytest.mark.serial]

SCALE = 0.1  # wall seconds per model second


def _ttft_s(url: str, prompt: str) -> tuple[float, int]:
    """(model-time TTFT, prompt tokens) of one streaming chat request."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.monotonic()
    first = None
    prompt_tokens = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data:") and first is None:
                first = time.monotonic()
            if '"prompt_tokens"' in line:
                usage = json.loads(line[5:]).get("usage") or {}
                prompt_tokens = usage.get("prompt_tokens", prompt_tokens)
    assert first is not None
    return (first - t0) / SCALE, prompt_tokens


def test_prefill_cost_grows_with_prompt_tokens(tmp_path: Path) -> None:
    ms_per_token = 5.0
    env = {"DSV4_TWIN_TIME_SCALE": str(SCALE), "DSV4_TWIN_PREFILL_MS_PER_TOKEN": str(ms_per_token)}
    with twin_server([], env=env, workdir=tmp_path) as proc:
        short_s, short_tokens = _ttft_s(proc.url, "hi")
        long_s, long_tokens = _ttft_s(proc.url, "lorem ipsum dolor sit amet " * 300)
    assert long_tokens > short_tokens + 500, (short_tokens, long_tokens)
    expected = (long_tokens - short_tokens) * ms_per_token / 1000.0
    measured = long_s - short_s
    # Model seconds; the margin covers scheduling noise on a loaded 2-core machine, while a
    # missing or per-request (not per-token) cost would be far outside it.
    assert expected * 0.8 <= measured <= expected * 1.5 + 0.5, (measured, expected)


def _startup_model_s(tmp_path: Path, buckets: list[str]) -> float:
    env = {
        "DSV4_TWIN_TIME_SCALE": "0.01",
        "DSV4_TWIN_MODEL_LOAD_S": "50",
        "DSV4_TWIN_CAPTURE_S_PER_BUCKET": "20",
        "DSV4_TWIN_WARMUP_S": "0",
    }
    args = ["--enable-metrics", "--cuda-graph-bs-decode", *buckets]
    tmp_path.mkdir(parents=True, exist_ok=True)
    with twin_server(args, env=env, workdir=tmp_path, fast=False) as proc:
        text = httpx.get(f"{proc.url}/metrics", timeout=5).text
    for fam in text_string_to_metric_families(text):
        if fam.name == "sglang:startup_time_seconds":
            return next(s.value for s in fam.samples if s.labels.get("phase") == "total")
    raise AssertionError("no sglang:startup_time_seconds{phase=total}")


def test_startup_is_model_load_plus_capture_per_bucket(tmp_path: Path) -> None:
    few = _startup_model_s(tmp_path / "few", ["8", "16"])
    many = _startup_model_s(tmp_path / "many", [str(b) for b in range(8, 104, 8)])  # 12 buckets
    assert 50 + 2 * 20 <= few <= (50 + 2 * 20) * 1.3, few
    # Ten more captured buckets cost ten times the per-bucket capture time.
    assert 200 * 0.85 <= many - few <= 200 * 1.3, (few, many)
