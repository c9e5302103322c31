"""Every figure of a sweep on one clock: model time, the twin's scale stated (issue 23, item 4)."""

from __future__ import annotations

import asyncio

import pytest

from dsv4ops.canary.fit import LevelPoint
from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.timescale import clock_record, server_time_scale, to_model_time
from testing.twin import twin_server


def test_client_figures_are_brought_to_model_time() -> None:
    wall = LevelPoint(
        concurrency=64,
        bs=64.0,
        step_ms=8.6,
        output_tok_s=7440.0,
        output_tok_s_ci=(7300.0, 7600.0),
        itl_p50_ms=8.6,
    )
    model = to_model_time(wall, 0.1)
    assert model.step_ms == pytest.approx(86.0) and model.output_tok_s == pytest.approx(744.0)
    assert model.output_tok_s_ci == pytest.approx((730.0, 760.0))
    assert model.itl_p50_ms == pytest.approx(86.0) and to_model_time(wall, 1.0) is wall
    assert clock_record(0.1)["time_scale"] == 0.1 and clock_record(1.0)["name"] == "model"


@pytest.mark.slow
def test_the_twin_states_its_time_scale_in_server_info() -> None:
    async def ask(url: str) -> float:
        async with ChatClient(url, connections=2, engine="aiohttp") as client:
            return await server_time_scale(client, url + "/metrics")

    with twin_server(["--enable-metrics"], env={"DSV4_TWIN_TIME_SCALE": "0.1"}) as proc:
        assert asyncio.run(ask(proc.url)) == pytest.approx(0.1)
    assert asyncio.run(_no_server()) == 1.0


async def _no_server() -> float:
    async with ChatClient("http://127.0.0.1:9", connections=1, engine="aiohttp") as client:
        return await server_time_scale(client, None)
