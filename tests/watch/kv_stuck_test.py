"""A KV transfer that fails silently (issue 44 item 2; sgl-project/sglang#36033: NIXL sends the
decode no failure notice, so the request waits SGLANG_DISAGGREGATION_WAITING_TIMEOUT producing
nothing). The twin's lost_transfer hazard holds a share of the decode's transfers that way,
behind the real router under traffic: watch reports kv_transfer_stuck within its stated time,
and nothing of the kind without the hazard."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsv4ops.watch import WatchSettings
from testing.twin import RouterTraffic, TwinStack, twin_stack
from testing.watch import hazard, local_watcher, watch_for

pytestmark = [pytest.mark.slow, pytest.mark.router]

SCALE = 0.1
ENV = {
    "DSV4_TWIN_TIME_SCALE": str(SCALE),
    "DSV4_TWIN_HAZARDS": "off",
    # model seconds: a held request is failed after 150 s (15 s wall), past the 60 s window
    "DSV4_TWIN_WAITING_TIMEOUT_S": "150",
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "150",
}
BUCKETS = (1, 2, 4, 8)
DECODE = [
    "--enable-metrics",
    "--tool-call-parser",
    "deepseekv4",
    "--decode-log-interval",
    "4",
    "--cuda-graph-bs-decode",
    *map(str, BUCKETS),
]
SETTINGS = WatchSettings(time_scale=SCALE, max_decode_bucket=max(BUCKETS))
SLACK_S = 3.0  # a round on 2 busy cores


@pytest.fixture(scope="module")
def stack() -> Iterator[TwinStack]:
    with twin_stack(
        router=True, env=ENV, prefill_args=["--enable-metrics"], decode_args=DECODE
    ) as s:
        assert s.router is not None
        with RouterTraffic(s.router.url, threads=3):
            yield s


def test_a_silently_lost_transfer_is_reported_and_nothing_without_it(
    stack: TwinStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert stack.router is not None
    tmp = str(tmp_path_factory.mktemp("agent"))
    stated = SETTINGS.wall(SETTINGS.detection_times_s()["kv_transfer_stuck"]) + SLACK_S
    # without the hazard: past the whole window, transfers complete and nothing is reported
    quiet = watch_for(local_watcher(stack, tmp, SETTINGS, BUCKETS), None, stated)
    assert "kv_transfer_stuck" not in quiet.codes(), [
        f.line() for r in quiet.rounds for f in r.findings
    ]
    hazard(stack.decode.url, "lost_transfer", "force")  # half the rooms, by a seeded hash
    try:
        # clients that wait for a held stream (the background's cut theirs after 5 s): each
        # sends until one of its requests is held, within a few (each is lost with p = 0.5)
        with RouterTraffic(stack.router.url, threads=2, read_timeout_s=60.0):
            seen = watch_for(
                local_watcher(stack, tmp, SETTINGS, BUCKETS), "kv_transfer_stuck", stated
            )
            hazard(stack.decode.url, "lost_transfer", "off")
    finally:
        hazard(stack.decode.url, "lost_transfer", "off")
    assert "kv_transfer_stuck" in seen.first_seen, seen.codes()
    assert seen.first_seen["kv_transfer_stuck"] >= SETTINGS.wall(SETTINGS.kv_stuck_s) * 0.9
    f = next(f for r in seen.rounds for f in r.findings if f.code == "kv_transfer_stuck")
    assert f.runbook == "bootstrap-degradation" and "sglang#36033" in f.evidence[2]
    assert "on every scrape" in f.evidence[0]
    # not a wedge: the decode kept decoding the requests whose KV arrived
    assert "decode_wedged" not in seen.codes()
