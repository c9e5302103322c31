"""`/health` lies in both directions (issue 44 item 3): long chunked prefills fail it without a
wedge (sgl-project/sglang#22511), and a wedged decode still answers it. Against the twin made
slow on /health (its slow_health hazard) behind the real router, with traffic flowing, watch's
/health reads time out and it reports nothing: no wedge, nothing down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsv4ops.watch import WatchSettings
from testing.twin import RouterTraffic, TwinStack, twin_stack
from testing.watch import hazard, local_watcher, watch_for

pytestmark = [pytest.mark.slow, pytest.mark.router]

SCALE = 0.1
# 70 model s = 7 s wall: above watch's 5 s /health wait (loop.SCRAPE_TIMEOUT_S), below the
# router's own health-check timeout (30 s, as the shipped profiles set it)
ENV = {
    "DSV4_TWIN_TIME_SCALE": str(SCALE),
    "DSV4_TWIN_HAZARDS": "off",
    "DSV4_TWIN_HEALTH_DELAY_S": "70",
}
BUCKETS = (1, 2, 4, 8)
SETTINGS = WatchSettings(time_scale=SCALE, max_decode_bucket=max(BUCKETS))


@pytest.fixture(scope="module")
def stack() -> Iterator[TwinStack]:
    with twin_stack(
        router=True,
        env=ENV,
        prefill_args=["--enable-metrics"],
        decode_args=[
            "--enable-metrics",
            "--tool-call-parser",
            "deepseekv4",
            "--cuda-graph-bs-decode",
            *map(str, BUCKETS),
        ],
        router_args=["--health-check-timeout-secs", "30"],
    ) as s:
        assert s.router is not None
        for url in (s.prefill.url, s.decode.url):  # once up: start-up waits on /health
            hazard(url, "slow_health", "force")
        with RouterTraffic(s.router.url, threads=2):
            yield s


def test_a_health_timeout_alone_is_no_wedge_and_nothing_down(
    stack: TwinStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = str(tmp_path_factory.mktemp("agent"))
    # past the wedge window (2 s wall) and the down streak, with probes through the router
    seen = watch_for(local_watcher(stack, tmp, SETTINGS, BUCKETS), None, 14.0)
    assert seen.codes() == set(), [f.line() for r in seen.rounds for f in r.findings]
    assert len(seen.rounds) >= 2 and all(r.word == "ok" for r in seen.rounds)
    # /health was asked of both workers and never answered in time; the decode kept decoding
    assert all(
        r.scrape.servers[n].health is None for r in seen.rounds for n in ("prefill", "decode")
    )
    tokens = [r.scrape.servers["decode"].decode_tokens or 0.0 for r in seen.rounds]
    assert tokens[-1] > tokens[0]
    assert any(p.status == "ok" for r in seen.rounds for p in r.probes)
