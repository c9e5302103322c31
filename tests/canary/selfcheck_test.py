from __future__ import annotations

import asyncio
import time

from dsv4ops.canary.selfcheck import SelfCheck, read_proc_stat
from dsv4ops.canary.verdict import Kind


def test_proc_stat_is_read() -> None:
    stat = read_proc_stat()
    assert stat is not None
    busy, total = stat
    assert 0 <= busy <= total
    assert read_proc_stat("/nonexistent/stat") is None


def test_a_blocked_loop_is_reported_as_lag() -> None:
    async def main() -> SelfCheck:
        async with SelfCheck(tick_s=0.01, lag_p99_max_ms=50.0) as sc:
            for _ in range(5):
                await asyncio.sleep(0.02)
                time.sleep(0.15)  # a callback hogging the loop, as a saturated client does
        return sc

    rep = asyncio.run(main()).report
    assert rep.loop_lag_max_ms >= 100.0
    assert [p.kind for p in rep.problems] == [Kind.CLIENT_LAG]  # typed where it is found
    assert "event-loop lag" in rep.problems[0].text
    assert rep.to_json()["problems"] == [rep.problems[0].text]
    assert rep.to_json()["client_bound"] is True


def test_an_idle_loop_is_not_flagged() -> None:
    async def main() -> SelfCheck:
        async with SelfCheck(tick_s=0.01, cpu_max=0.9, lag_p99_max_ms=1000.0) as sc:
            await asyncio.sleep(0.6)
        return sc

    rep = asyncio.run(main()).report
    assert rep.problems == [] and rep.cpu_cores < 0.9 and rep.samples > 10
