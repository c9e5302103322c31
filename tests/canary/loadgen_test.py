from __future__ import annotations

import asyncio

import pytest

from dsv4ops.canary import records as R
from dsv4ops.canary.loadgen import ChatClient, closed_loop, level_windows, poisson
from dsv4ops.canary.workload import Mix
from testing.canary import fake_server
from testing.ports import free_port

pytestmark = pytest.mark.slow


def _max_overlap(recs: list[R.RequestRecord]) -> int:
    edges = sorted([(r.t_send, 1) for r in recs] + [(r.t_end, -1) for r in recs])
    best = cur = 0
    for _, d in edges:
        cur += d
        best = max(best, cur)
    return best


# Both streaming engines: rawhttp (http://, the default) and aiohttp (https, credentials in the URL).
ENGINES = pytest.mark.parametrize("engine", ["raw", "aiohttp"])


@ENGINES
def test_closed_loop_fixed_concurrency_and_count(engine: str) -> None:
    async def main(url: str) -> list[R.RequestRecord]:
        async with ChatClient(url, connections=8, engine=engine) as client:
            return await closed_loop(
                client, Mix(prefix="t", max_tokens=8), concurrency=3, num_requests=10
            )

    with fake_server({"a_ms": 2}) as url:
        recs = asyncio.run(main(url))
    assert len(recs) == 10 and all(r.ok for r in recs)
    assert _max_overlap(recs) == 3
    assert all(r.output_tokens == 8 and len(r.token_times) == 8 for r in recs)
    assert all(
        r.t_first and r.t_first <= r.token_times[0] for r in recs
    )  # live stamp = first token


def test_poisson_open_loop_with_a_cap_records_queue_wait() -> None:
    async def main(url: str) -> list[R.RequestRecord]:
        async with ChatClient(url, connections=8) as client:
            return await poisson(
                client,
                Mix(prefix="p", max_tokens=20),
                rate_per_s=200.0,
                num_requests=12,
                max_concurrency=2,
                seed=3,
            )

    with fake_server({"a_ms": 5}) as url:
        recs = asyncio.run(main(url))
    assert len(recs) == 12 and all(r.ok for r in recs)
    assert _max_overlap(recs) <= 2
    # arrivals outpace 2 slots of ~100 ms requests: later requests waited for a slot
    assert max(r.queue_wait_s for r in recs) > 0.1


@ENGINES
def test_connection_refused_is_recorded_not_raised(engine: str) -> None:
    async def main() -> R.RequestRecord:
        async with ChatClient(f"http://127.0.0.1:{free_port()}", engine=engine) as client:
            return await client.stream({"messages": []}, rid="x")

    rec = asyncio.run(main())
    assert rec.error == R.ERR_CONNECT


def test_level_windows_skip_warmup() -> None:
    assert level_windows([0.0, 10.0], 20.0, warm_frac=0.3) == [(3.0, 10.0), (13.0, 20.0)]


@ENGINES
def test_server_errors_are_http_errors_with_the_message(engine: str) -> None:
    async def main(url: str) -> list[R.RequestRecord]:
        async with ChatClient(url, connections=4, engine=engine) as client:
            return await closed_loop(
                client, Mix(prefix="e", max_tokens=4), concurrency=2, num_requests=4
            )

    with fake_server({"a_ms": 1, "error_every": 2}) as url:
        recs = asyncio.run(main(url))
    failed = [r for r in recs if not r.ok]
    assert len(failed) == 2 and all(r.error == R.ERR_HTTP and r.status == 500 for r in failed)
    assert all("injected failure" in r.error_detail for r in failed)
    assert all(r.ok and r.output_tokens == 4 for r in recs if r not in failed)
