"""`dsv4ops watch` against the twin behind the real router: quiet with hazards off, then each
seed incident forced in turn is reported within its stated detection time (docs/monitoring.md,
at the twin's time scale: model seconds x 0.1).

One stack for the module; light background traffic through the router all along; a fresh
Watcher per phase (so one phase's finding does not linger into the next); the real supervisor's
`http_many` (the target agent makes the requests, as for a deployed target).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from dsv4ops.watch import WatchSettings
from testing.twin import RouterTraffic, TwinStack, twin_stack
from testing.watch import Watched, hazard, local_watcher, watch_for

pytestmark = [pytest.mark.slow, pytest.mark.router]

SCALE = 0.1
ENV = {
    "DSV4_TWIN_TIME_SCALE": str(SCALE),
    "DSV4_TWIN_HAZARDS": "off",
    # model seconds: a lost transfer is counted after 20 s (SGLang's default is 300)
    "DSV4_TWIN_WAITING_TIMEOUT_S": "20",
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "20",
    "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "0.5",
    "DSV4_TWIN_CORRUPT_PROB": "1.0",
}  # only while forced
BUCKETS = (1, 2, 4, 8)
DECODE = [
    "--enable-metrics",
    "--disable-overlap-schedule",
    "--tool-call-parser",
    "deepseekv4",
    "--cuda-graph-bs-decode",
    *map(str, BUCKETS),
]
SETTINGS = WatchSettings(time_scale=SCALE, max_decode_bucket=max(BUCKETS))
# The load and the machine's share: a round is an agent call (~0.1-0.5 s wall on 2 busy cores).
SLACK_S = 3.0


@pytest.fixture(scope="module")
def stack() -> Iterator[TwinStack]:
    with twin_stack(
        router=True, env=ENV, prefill_args=["--enable-metrics"], decode_args=DECODE
    ) as s:
        assert s.router is not None
        with RouterTraffic(
            s.router.url, threads=2
        ):  # + 2 probes (and a finishing one): well below 8
            yield s


def _stated(code: str, extra_model_s: float = 0.0) -> float:
    return SETTINGS.wall(SETTINGS.detection_times_s()[code] + extra_model_s) + SLACK_S


def _watch(stack: TwinStack, tmp: str, code: str | None, timeout_s: float) -> Watched:
    return watch_for(local_watcher(stack, tmp, SETTINGS, BUCKETS), code, timeout_s)


def test_each_forced_incident_is_reported_in_time_and_nothing_with_hazards_off(
    stack: TwinStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = str(tmp_path_factory.mktemp("agent"))
    quiet = _watch(stack, tmp, None, 5.0)  # > the wedge window (2 s) and two probe rounds
    assert quiet.codes() == set(), [f.line() for r in quiet.rounds for f in r.findings]
    assert sum(1 for r in quiet.rounds if r.probes) >= 2
    assert all(p.status == "ok" for r in quiet.rounds for p in r.probes)

    hazard(stack.decode.url, "corrupt", "force", shapes=["dropped_call", "dsml_in_content"])
    seen = _watch(stack, tmp, "tool_call_corruption", _stated("tool_call_corruption"))
    hazard(stack.decode.url, "corrupt", "off")
    assert "tool_call_corruption" in seen.first_seen, seen.codes()
    assert seen.codes() == {"tool_call_corruption"}

    assert stack.router is not None
    with RouterTraffic(stack.router.url, threads=10, max_requests=600):  # batches above 8
        seen = _watch(stack, tmp, "eager_fallback", _stated("eager_fallback"))
    assert "eager_fallback" in seen.first_seen, seen.codes()
    finding = next(f for r in seen.rounds for f in r.findings if f.code == "eager_fallback")
    assert "decode_none" in finding.evidence[0] and finding.runbook == "bucket-tuning"

    for url in (stack.prefill.url, stack.decode.url):
        hazard(url, "degrade", "force")
    # the counters move once the twin's 20 model-s transfer timeout has passed
    seen = _watch(stack, tmp, "pd_transfer_degraded", _stated("pd_transfer_degraded", 20.0))
    for url in (stack.prefill.url, stack.decode.url):
        hazard(url, "degrade", "off")
    assert "pd_transfer_degraded" in seen.first_seen, seen.codes()
    assert "decode_wedged" not in seen.codes()

    # Last (only a restart clears it), and under load as in the seeds (an abort cascade at
    # high concurrency), so rank 0's last published running gauge is > 0 when it blocks.
    with RouterTraffic(stack.router.url, threads=4, max_requests=400):
        time.sleep(0.5)
        hazard(stack.decode.url, "wedge", "force")
        seen = _watch(stack, tmp, "decode_wedged", _stated("decode_wedged"))
    assert "decode_wedged" in seen.first_seen, seen.codes()
    assert seen.first_seen["decode_wedged"] >= SETTINGS.wall(SETTINGS.wedge_window_s()) * 0.9
    wedge = next(f for r in seen.rounds for f in r.findings if f.code == "decode_wedged")
    assert wedge.runbook == "decode-wedge" and "stuck at" in wedge.evidence[1]
