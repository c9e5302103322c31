"""Every /metrics reader stops at METRICS_READ_CAP_BYTES, not only watch (issue 40 item 3 left
status, the drain, runbook checks and the canary's sampler reading whole bodies): real HTTP
servers on 127.0.0.1, one sending ~53 MB of series, read through the real target agent and this
machine's aiohttp client. A body over the cap is UNREAD, an unknown load (never idle, never a
number parsed from a cut body); a real 0.5.23 decode body is read as before."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.sampler import scrape_once
from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES
from dsv4ops.orchestrate.status import _requests
from dsv4ops.orchestrate.workload import load_of, metrics_request
from dsv4ops.remote import LocalExecutor, Supervisor
from dsv4ops.remote.base import ProcessState
from dsv4ops.runbooks.model import Condition
from dsv4ops.runbooks.world import TargetWorld
from testing.orchestrate import make_deployment
from testing.ports import free_ports
from testing.watch import OBSERVED_DECODE_METRICS, metrics_unit, runaway_metrics


def test_status_and_the_drain_read_a_capped_body_as_an_unknown_load(tmp_path: Path) -> None:
    runaway, normal = free_ports(2)
    real = OBSERVED_DECODE_METRICS.read_bytes()
    supervisor = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    with metrics_unit({runaway: runaway_metrics, normal: lambda: [real]}) as sent:
        big, ok = supervisor.http_many(
            [metrics_request(f"http://127.0.0.1:{p}/metrics", 30.0) for p in (runaway, normal)],
            timeout_s=30.0,
        )
    assert not sent.whole[runaway] and sent.sent[runaway] < 40 << 20, sent  # of ~53 MB
    unread = load_of(big)
    assert not unread.known and not unread.busy
    assert unread.error == "/metrics longer than 8 MiB: not read"
    assert load_of(ok).known and sent.whole[normal]


def test_status_asks_every_worker_metrics_read_with_the_cap() -> None:
    deployed = make_deployment("baseline")
    states = {n: ProcessState(name=n, pid=1, alive=True) for n in ("prefill", "decode", "router")}
    reads = _requests(states, deployed)
    metrics = [r for r in reads if r["url"].endswith("/metrics")]
    assert len(metrics) == 2  # prefill and decode; the router's port is read elsewhere
    assert all(r.get("max_bytes") == METRICS_READ_CAP_BYTES for r in metrics), metrics
    assert all("max_bytes" not in r for r in reads if not r["url"].endswith("/metrics"))


def test_the_canary_sampler_stops_at_the_cap() -> None:
    runaway, normal = free_ports(2)
    real = OBSERVED_DECODE_METRICS.read_bytes()

    async def scrape(port: int) -> Any:
        url = f"http://127.0.0.1:{port}"
        async with ChatClient(url, engine="aiohttp") as client:
            return await scrape_once(client, url)

    with metrics_unit({runaway: runaway_metrics, normal: lambda: [real]}) as sent:
        assert asyncio.run(scrape(runaway)) is None
        gauges = asyncio.run(scrape(normal))
    assert not sent.whole[runaway] and sent.sent[runaway] < 40 << 20, sent
    assert gauges is not None and gauges.running is not None


def test_a_runbook_metric_condition_on_a_runaway_body_does_not_hold(tmp_path: Path) -> None:
    (runaway,) = free_ports(1)
    supervisor = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    world = TargetWorld(supervisor, SimpleNamespace(), target="t", status=dict)  # type: ignore[arg-type]
    decode = SimpleNamespace(url=lambda path="": f"http://127.0.0.1:{runaway}{path}", api_key=None)
    world._component = lambda name: decode  # type: ignore[method-assign,assignment,return-value]
    until = Condition(
        kind="metric",
        component="decode",
        line=3,
        series="sglang:num_running_reqs",
        op="==",
        value=0,
    )
    with metrics_unit({runaway: runaway_metrics}) as sent:
        held, seen = world.check(until)
    assert not held and seen == "decode sent more than 8 MiB of /metrics: not read"
    assert not sent.whole[runaway], sent
