"""The metrics freeze window follows the deployed decode's `--decode-log-interval`.

Through a real twin decode started with `--decode-log-interval 200` and the worst-case counter
(`DSV4_TWIN_REALTIME_TOKENS=per_log_interval`: `realtime_tokens_total` moves only at each log),
its /metrics read by the canary's own parser, fed to two real Watchdogs: one sized for SGLang's
default 40 (what every suite used, whatever the decode ran), one for the deployed 200. The
healthy decode's counter rests a whole log interval between bumps; the default window ends
inside it (a false wedge, a FAIL and a rollback of a healthy deploy), the threaded one does not,
and still confirms a real wedge within two log intervals.

The watchdogs run on the twin's model clock (wall / time scale): their constants are the box's
step times (progress.FALLBACK_STEP_S), and in model time the twin paces exactly as the box
would, so 30 model seconds take 1.5 s here.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from dsv4ops.canary import run_suite
from dsv4ops.canary.suites.common import SuiteContext, harness
from dsv4ops.canary.watchdog import FREEZE_METRICS, Watchdog
from dsv4ops.clock import perf_ns
from dsv4ops.deployment import Deployment
from dsv4ops.metrics.prom import parse_text, server_gauges
from testing.canary import fake_server
from testing.orchestrate import make_deployment
from testing.twin import fake_bootstrap, twin_server

pytestmark = pytest.mark.slow

SCALE = 0.05
INTERVAL = 200
# A step of ~44 model ms, what DSV4 takes at ~25 running on the box (18 + 1.05 x 25), with only
# 4 requests so the twin stays cheap: 200 iterations are ~9 model s between two bumps, longer
# than the 6 s the default-40 window allows before it has seen a gap.
ENV = {
    "DSV4_TWIN_TIME_SCALE": str(SCALE),
    "DSV4_TWIN_STEP_A_MS": "40",
    "DSV4_TWIN_REALTIME_TOKENS": "per_log_interval",
    "DSV4_TWIN_HAZARDS": "off",
}
DECODE = [
    "--disaggregation-mode",
    "decode",
    "--enable-metrics",
    "--disable-overlap-schedule",
    "--cuda-graph-bs-decode",
    "1",
    "2",
    "4",
    "--decode-log-interval",
    str(INTERVAL),
]


def with_decode_args(dep: Deployment, *args: str) -> Deployment:
    """`dep` with `args` added to its decode's command line."""
    return replace(
        dep,
        commands_hash="",
        components=tuple(
            replace(c, argv=(*c.argv, *args)) if c.name == "decode" else c for c in dep.components
        ),
    )


def model_ns() -> int:
    return int(perf_ns() / SCALE)


async def _hold(session: aiohttp.ClientSession, url: str, i: int) -> None:
    body = {"text": f"long {i}", "sampling_params": {"max_new_tokens": 10**6}, **fake_bootstrap()}
    async with session.post(f"{url}/generate", json=body) as resp:
        await resp.read()


async def _watch(url: str, deployed: Deployment) -> dict[str, Any]:
    default = Watchdog(clock_ns=model_ns)  # what every suite built, whatever the decode ran
    threaded = Watchdog(clock_ns=model_ns, decode_log_interval=deployed.decode_log_interval)
    bumps: list[int] = []
    wedged_at: int | None = None
    async with aiohttp.ClientSession() as session:
        load = [asyncio.create_task(_hold(session, url, i)) for i in range(4)]
        try:
            deadline = model_ns() + int(200e9)
            last = None
            while model_ns() < deadline and not (wedged_at and threaded.events):
                async with session.get(f"{url}/metrics") as resp:
                    gauges = server_gauges(parse_text(await resp.text()))
                if gauges.decode_tokens and gauges.decode_tokens != last:
                    bumps.append(model_ns())
                    last = gauges.decode_tokens
                for wd in (default, threaded):
                    wd.observe_metrics(url, gauges)
                if len(bumps) == 2 and wedged_at is None:  # a healthy gap seen: now wedge it
                    healthy = {"default": list(default.events), "threaded": list(threaded.events)}
                    async with session.post(
                        f"{url}/_twin/hazard", json={"hazard": "wedge", "state": "force"}
                    ) as resp:
                        assert resp.status == 200
                    wedged_at = model_ns()
                await asyncio.sleep(0.4 * SCALE)  # a scrape every 0.4 model s
        finally:
            for t in load:
                t.cancel()
            await asyncio.gather(*load, return_exceptions=True)
    assert wedged_at is not None, f"the decode's counter bumped only {len(bumps)} times"
    return {
        "bumps": bumps,
        "healthy": healthy,
        "wedged_at": wedged_at,
        "after_wedge": threaded.events,
    }


def test_the_deployed_log_interval_keeps_a_healthy_decode_unflagged_and_still_catches_a_wedge() -> (
    None
):
    with twin_server(DECODE, env=ENV) as proc:
        seen = asyncio.run(_watch(proc.url, with_decode_args(make_deployment("d"), *DECODE)))
    bumps = seen["bumps"]
    gaps_s = [(b - a) / 1e9 for a, b in zip(bumps, bumps[1:], strict=False)]
    # healthy: the counter moved once per log interval, each rest longer than the default window
    assert all(g > 1.5 * 40 * 0.1 for g in gaps_s), gaps_s
    default_events, threaded_events = seen["healthy"]["default"], seen["healthy"]["threaded"]
    assert [e.kind for e in default_events] == [FREEZE_METRICS]  # the false wedge of today's main
    assert default_events[0].detected_ns < bumps[1]  # ...and the decode moved on after it
    assert threaded_events == []
    (wedge,) = seen["after_wedge"]
    assert wedge.kind == FREEZE_METRICS and wedge.detected_ns > seen["wedged_at"]
    # confirmed within two log intervals of the last bump
    assert wedge.detection_latency_s < 2 * max(gaps_s), (wedge.detection_latency_s, gaps_s)


def test_run_suite_sizes_the_watchdog_by_the_decode_log_interval_it_is_given() -> None:
    async def built(ctx: SuiteContext) -> int:
        async with harness(ctx, connections=1, name="t") as h:
            return h.watchdog.progress.decode_log_interval

    with fake_server({"a_ms": 2, "b_ms": 0.1}) as url:
        result = run_suite("smoke", url, concurrency=2, decode_log_interval=INTERVAL)
        # a harness reaches the server before it is built
        assert asyncio.run(built(SuiteContext(base_url=url))) == 40  # SGLang's default
    assert result.metrics["hangs"]["decode_log_interval"] == INTERVAL


def test_a_deployment_reports_its_decode_log_interval() -> None:
    dep = make_deployment("d")
    assert dep.decode_log_interval == 40  # SGLang's default when the flag is not given
    assert with_decode_args(dep, "--decode-log-interval", "200").decode_log_interval == 200
    assert with_decode_args(dep, "--decode-log-interval=7").decode_log_interval == 7
