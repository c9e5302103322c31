"""A real Prometheus scrapes the twin behind the real router, of each kind (sglang-router 0.3.2,
SMG 1.13.0), and evaluates the rules rendered for that router.

One stack, three phases at the twin's time scale (rules rendered with the same scale, so every
window and `for` is the box's in model time): hazards off, nothing is even pending; bootstrap
degradation forced, the transfer-failure alert fires; the decode wedged (rank 0 blocked, gauges
frozen at their last values), the wedge alert fires.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from dsv4ops import _yaml
from dsv4ops.monitoring import RuleSettings, alert_rules, scrape_config
from dsv4ops.routerkind import RouterKind
from testing.monitoring import BINARY, prometheus_server
from testing.twin import DEFAULT_MODEL_PATH, RouterTraffic, TwinStack, twin_stack

pytestmark = [
    pytest.mark.slow,
    pytest.mark.router,
    # In CI a missing binary fails the test (make install must have installed it).
    pytest.mark.skipif(
        BINARY is None and not os.environ.get("CI"),
        reason="prometheus missing: `make install` " "installs Debian's prometheus package",
    ),
]

SCALE = 0.1
ENV = {
    "DSV4_TWIN_TIME_SCALE": str(SCALE),
    "DSV4_TWIN_HAZARDS": "off",
    # model seconds: failed transfers are noticed after 20 s (SGLang's default is 300)
    "DSV4_TWIN_WAITING_TIMEOUT_S": "20",
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "20",
    "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "0.5",
}
DECODE = [
    "--enable-metrics",
    "--disable-overlap-schedule",
    "--tool-call-parser",
    "deepseekv4",
    "--cuda-graph-bs-decode",
    "8",
    "16",
    "32",
]


@dataclass(frozen=True)
class _StackComponent:
    metrics_url: str


class _StackDeployment:
    """What scrape_config reads of a rendered Deployment, for a test stack's ports."""

    def __init__(self, stack: TwinStack) -> None:
        assert stack.router is not None
        self.urls = {
            "prefill": stack.prefill.url + "/metrics",
            "decode": stack.decode.url + "/metrics",
            "router": f"http://127.0.0.1:{stack.router.prometheus_port}/metrics",
        }

    def component(self, name: str) -> _StackComponent:
        return _StackComponent(self.urls[name])


def _hazard(stack: TwinStack, name: str, state: str) -> None:
    for url in (stack.prefill.url, stack.decode.url):
        httpx.post(
            url + "/_twin/hazard", json={"hazard": name, "state": state}, timeout=5
        ).raise_for_status()


@pytest.mark.parametrize("kind", list(RouterKind), ids=str)
def test_each_forced_hazard_fires_its_alert_and_nothing_fires_with_hazards_off(
    tmp_path: Path, kind: RouterKind
) -> None:
    settings = RuleSettings(time_scale=SCALE, max_decode_bucket=32, router_kind=kind)
    rules = _yaml.dump(alert_rules(settings))
    with twin_stack(
        router=True,
        router_kind=kind,
        env=ENV,
        prefill_args=["--enable-metrics"],
        decode_args=DECODE,
    ) as stack:
        assert stack.router is not None  # router=True
        config = _yaml.dump(
            scrape_config(
                _StackDeployment(stack),
                settings,
                rules_file="dsv4ops-alerts.yml",
                profile_name="test",
                target_name="twin",
            )
        )
        with (
            prometheus_server(config, rules) as prom,
            RouterTraffic(stack.router.url, model=DEFAULT_MODEL_PATH),
        ):
            # Hazards off: longer than the wedge window + its `for` (2 s + 6 s wall).
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                assert prom.active() == set(), prom.alerts()
                time.sleep(0.5)
            assert prom.targets_up() == {
                "dsv4-prefill": 1.0,
                "dsv4-decode": 1.0,
                "dsv4-router": 1.0,
            }

            _hazard(stack, "degrade", "force")
            took = prom.wait_firing("DSV4PDTransferFailing", timeout=40)
            assert "DSV4DecodeWedged" not in prom.active()
            _hazard(stack, "degrade", "off")

            _hazard(stack, "wedge", "force")
            wedge_took = prom.wait_firing("DSV4DecodeWedged", timeout=40)
    # wedge window 20 s + for 60 s model = 8 s wall, plus scrape/evaluation steps
    assert wedge_took >= 6.0, "fired before its window and `for` could have passed"
    assert took < 40 and wedge_took < 40
