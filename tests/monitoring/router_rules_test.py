"""The router's rules, dashboard and watch reading follow the profile's router (issue 43).

sglang-router 0.3.2 and SMG 1.13.0 export the same family names (`smg_worker_health`,
`smg_http_responses_total`, scraped from each behind the twin); SMG labels each answer with its
route (`path`) and counts its own /readiness 503s (a worker down) with the clients' answers.
Rendered for SMG, the 5xx that clients saw leave those out; 0.3.2 cannot tell them apart.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsv4ops import _yaml
from dsv4ops.monitoring import RuleSettings, alert_rules
from dsv4ops.remote.results import HttpReply
from dsv4ops.routerkind import RouterKind
from dsv4ops.watch.readings import router_reading

REPO = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("CI"),
    reason="promtool missing: `make install` installs Debian's prometheus package",
)
ROUTER = {"job": "dsv4-router", "instance": "box:29000"}
HEALTHY = [
    {"series": f'smg_worker_health{{worker="http://box:{p}",job="dsv4-router"}}', "values": "1x20"}
    for p in (30000, 30001)
]


def _responses(labels: str, values: str = "0x10 0+2x5") -> dict[str, str]:
    return {
        "series": f'smg_http_responses_total{{{labels},job="dsv4-router",instance="box:29000"}}',
        "values": values,
    }


def _promtool_fires(tmp_path: Path, kind: RouterKind, series: list[dict[str, str]]) -> bool:
    """Whether DSV4PDErrorsWhileHealthy, rendered for `kind`, fires on `series` (real promtool)."""
    assert PROMTOOL is not None
    rules = alert_rules(RuleSettings(router_kind=kind))
    (tmp_path / "rules.yml").write_text(_yaml.dump(rules))
    rule = next(r for r in rules["groups"][0]["rules"] if r["alert"] == "DSV4PDErrorsWhileHealthy")
    fired = [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
    verdicts = []
    for expected in (fired, []):
        test = {
            "interval": "5s",
            "input_series": [*series, *HEALTHY],
            "alert_rule_test": [
                {
                    "eval_time": "75s",
                    "alertname": "DSV4PDErrorsWhileHealthy",
                    "exp_alerts": expected,
                }
            ],
        }
        doc = {"rule_files": ["rules.yml"], "evaluation_interval": "5s", "tests": [test]}
        (tmp_path / "test.yml").write_text(_yaml.dump(doc))
        proc = subprocess.run(
            [PROMTOOL, "test", "rules", "test.yml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        verdicts.append(proc.returncode == 0)
    assert verdicts.count(True) == 1, "promtool must agree with exactly one expectation"
    return verdicts[0]


@needs_promtool
def test_smg_s_own_readiness_503s_are_not_errors_clients_saw(tmp_path: Path) -> None:
    readiness = [_responses('path="/readiness",status_code="503",error_code=""')]
    assert not _promtool_fires(tmp_path, RouterKind.SMG, readiness)
    chat = 'path="/v1/chat/completions",status_code="503",error_code="no_available_workers"'
    assert _promtool_fires(tmp_path, RouterKind.SMG, [_responses(chat)])


@needs_promtool
def test_sglang_router_counts_every_5xx_it_cannot_tell_apart(tmp_path: Path) -> None:
    # 0.3.2 has no `path` label: a /readiness 503 reads like a client's (what it exports)
    assert _promtool_fires(
        tmp_path, RouterKind.SGLANG_ROUTER, [_responses('status_code="503",error_code=""')]
    )


def _render(profile: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", "monitoring", "render", profile, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    rendered: dict[str, Any] = json.loads(proc.stdout)
    return rendered


@needs_promtool
def test_monitoring_render_follows_the_profile_s_router(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    own = 'path!~"/health|/liveness|/readiness"'
    for profile, kind in (("smg", RouterKind.SMG), ("baseline", RouterKind.SGLANG_ROUTER)):
        files = _render(profile)
        exprs = {r["alert"]: r["expr"] for r in files["rules"]["groups"][0]["rules"]}
        board = json.dumps(files["dashboard"])
        assert (own in exprs["DSV4PDErrorsWhileHealthy"]) is (kind is RouterKind.SMG)
        assert (own.replace('"', '\\"') in board) is (kind is RouterKind.SMG)
        assert exprs["DSV4RouterWorkerUnhealthy"] == "smg_worker_health == 0"
        assert f"smg_worker_health from {kind.label}" in board
        (tmp_path / f"{profile}.yml").write_text(_yaml.dump(files["rules"]))
        proc = subprocess.run(
            [PROMTOOL, "check", "rules", f"{profile}.yml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0 and "SUCCESS: 8 rules found" in proc.stdout, proc.stdout


SMG_METRICS = """\
# TYPE smg_http_responses_total counter
smg_http_responses_total{path="/readiness",status_code="503",error_code=""} 3
smg_http_responses_total{path="/v1/chat/completions",status_code="503",error_code="no_available_workers"} 1
smg_http_responses_total{path="/v1/chat/completions",status_code="200",error_code=""} 9
# TYPE smg_worker_health gauge
smg_worker_health{worker="http://127.0.0.1:31000"} 1
smg_worker_health{worker="http://127.0.0.1:31001"} 0
"""


def test_watch_reads_the_5xx_clients_got_from_each_router() -> None:
    reply = HttpReply(status=200, body=SMG_METRICS, error=None, elapsed_s=0.01)
    smg = router_reading(reply, router=RouterKind.SMG)
    assert smg.responses_5xx == 1.0  # the chat's, not SMG's own /readiness answers
    assert smg.worker_health == {"http://127.0.0.1:31000": 1.0, "http://127.0.0.1:31001": 0.0}
    assert router_reading(reply, router=RouterKind.SGLANG_ROUTER).responses_5xx == 4.0
