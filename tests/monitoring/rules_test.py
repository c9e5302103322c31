"""The alert rules, checked and unit-tested with the real `promtool` (Debian's prometheus package).

Each alert gets a firing case built on the box's signal (frozen last-published gauges, counters
that appear only at their first increment) and a quiet case that a naive rule would get wrong.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsv4ops import _yaml
from dsv4ops.monitoring import RuleSettings, alert_rules, duration
from dsv4ops.monitoring.rules import Alert

REPO = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
# In CI a missing binary fails the test (make install must have installed it); elsewhere it skips.
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("CI"),
    reason="promtool missing: `make install` " "installs Debian's prometheus package",
)

S = RuleSettings(max_decode_bucket=96)  # box defaults: 5 s scrapes, wedge window 20 s, for 60 s
DEC = {"engine_type": "decode", "instance": "box:30001", "job": "dsv4-decode"}
PRE = {"engine_type": "prefill", "instance": "box:30000", "job": "dsv4-prefill"}
GRAPH = "sglang:cuda_graph_passes_total"
IDLE = "sglang:scheduler_idle_seconds_total"


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def _rule(name: str) -> Alert:
    return next(r for r in alert_rules(S)["groups"][0]["rules"] if r["alert"] == name)


def _expect(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """The alert as promtool reports it: rule labels + result labels, templates expanded."""
    rule = _rule(name)

    def expand(text: str) -> str:
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)

    notes = rule["annotations"]
    return {
        "exp_labels": {**rule["labels"], **labels},
        "exp_annotations": {
            "summary": expand(notes["summary"]),
            "evidence": expand(notes["evidence"]),
            "runbook": expand(notes["runbook"]),
        },
    }


# (alert, input series, eval time, expected alerts). Times are multiples of the 5 s scrape.
CASES: list[tuple[str, list[dict[str, str]], str, list[dict[str, Any]]]] = [
    # A blocked rank 0: running and throughput keep their last values, the counter stops.
    (
        "DSV4DecodeWedged",
        [
            _series("sglang:num_running_reqs", DEC, "60x40"),
            _series("sglang:gen_throughput", DEC, "700x40"),
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "0+300x4 1200x36"),
        ],
        "2m",
        [_expect("DSV4DecodeWedged", {"instance": DEC["instance"]})],
    ),
    # Busy and progressing: the same gauges, the counter moves every scrape.
    (
        "DSV4DecodeWedged",
        [
            _series("sglang:num_running_reqs", DEC, "60x40"),
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "0+300x40"),
        ],
        "2m",
        [],
    ),
    # Idle: gen_throughput 0 and nothing running is not a wedge.
    (
        "DSV4DecodeWedged",
        [
            _series("sglang:num_running_reqs", DEC, "0x40"),
            _series("sglang:gen_throughput", DEC, "0x40"),
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "500x40"),
        ],
        "2m",
        [],
    ),
    # Failure counters on both sides; the decode's is born at 1 (multiprocess mode) while
    # Prometheus was already scraping that instance.
    (
        "DSV4PDTransferFailing",
        [
            _series("sglang:num_transfer_failed_reqs_total", PRE, "0x70 0+1x5"),
            _series("sglang:num_bootstrap_failed_reqs_total", DEC, "_x70 1x5"),
            _series("up", {"job": "dsv4-decode", "instance": DEC["instance"]}, "1x80"),
        ],
        "6m",
        [
            _expect(
                "DSV4PDTransferFailing", {"instance": PRE["instance"], "engine_type": "prefill"}
            ),
            _expect(
                "DSV4PDTransferFailing", {"instance": DEC["instance"], "engine_type": "decode"}
            ),
        ],
    ),
    # The same counter present at 1 when Prometheus starts: an old failure, not a new one.
    (
        "DSV4PDTransferFailing",
        [
            _series("sglang:num_bootstrap_failed_reqs_total", DEC, "1x20"),
            _series("up", {"job": "dsv4-decode", "instance": DEC["instance"]}, "1x20"),
        ],
        "75s",
        [],
    ),
    (
        "DSV4PDTransferFailing",
        [_series("sglang:num_transfer_failed_reqs_total", PRE, "3x80")],
        "6m",
        [],
    ),  # an old failure, nothing new in the window
    (
        "DSV4PDErrorsWhileHealthy",
        [
            _series(
                "smg_http_responses_total",
                {
                    "status_code": "500",
                    "error_code": "",
                    "job": "dsv4-router",
                    "instance": "box:29000",
                },
                "0x10 0+2x5",
            ),
            _series(
                "smg_worker_health",
                {"worker": "http://box:30000", "job": "dsv4-router", "instance": "box:29000"},
                "1x20",
            ),
            _series(
                "smg_worker_health",
                {"worker": "http://box:30001", "job": "dsv4-router", "instance": "box:29000"},
                "1x20",
            ),
        ],
        "75s",
        [_expect("DSV4PDErrorsWhileHealthy", {})],
    ),
    (
        "DSV4PDErrorsWhileHealthy",
        [
            _series(
                "smg_http_responses_total",
                {
                    "status_code": "500",
                    "error_code": "",
                    "job": "dsv4-router",
                    "instance": "box:29000",
                },
                "0x10 0+2x5",
            ),
            _series(
                "smg_worker_health",
                {"worker": "http://box:30001", "job": "dsv4-router", "instance": "box:29000"},
                "0x20",
            ),
        ],
        "75s",
        [],
    ),  # a worker known down is not "healthy but failing"
    (
        "DSV4PDQueueStuck",
        [
            _series("sglang:num_decode_transfer_queue_reqs", DEC, "3x60"),
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "800x60"),
        ],
        "4m",
        [_expect("DSV4PDQueueStuck", {"instance": DEC["instance"], "engine_type": "decode"})],
    ),
    (
        "DSV4PDQueueStuck",
        [
            _series("sglang:num_decode_transfer_queue_reqs", DEC, "3x60"),
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "0+100x60"),
        ],
        "4m",
        [],
    ),  # busy, transfers flowing
    (
        "DSV4ComponentDown",
        [_series("up", {"job": "dsv4-decode", "instance": "box:30001"}, "1x5 0x30")],
        "2m",
        [_expect("DSV4ComponentDown", {"job": "dsv4-decode", "instance": "box:30001"})],
    ),
    (
        "DSV4RouterWorkerUnhealthy",
        [
            _series(
                "smg_worker_health",
                {"worker": "http://box:30001", "job": "dsv4-router", "instance": "box:29000"},
                "1x5 0x30",
            )
        ],
        "2m",
        [
            _expect(
                "DSV4RouterWorkerUnhealthy",
                {"worker": "http://box:30001", "job": "dsv4-router", "instance": "box:29000"},
            )
        ],
    ),
    # Eager passes on a decode that runs graphs: 0.5.23 counts every pass by mode.
    (
        "DSV4DecodeEagerFallback",
        [
            _series(GRAPH, {**DEC, "mode": "decode_none"}, "0+2x80"),
            _series(GRAPH, {**DEC, "mode": "decode_cuda_graph"}, "0+50x80"),
        ],
        "6m",
        [_expect("DSV4DecodeEagerFallback", {"instance": DEC["instance"]})],
    ),
    # --disable-cuda-graph (the CPU target): every pass is eager, nothing fell back.
    (
        "DSV4DecodeEagerFallback",
        [_series(GRAPH, {**DEC, "mode": "decode_none"}, "0+50x80")],
        "6m",
        [],
    ),
    # An eager burst long ago: the counter stands still now.
    (
        "DSV4DecodeEagerFallback",
        [
            _series(GRAPH, {**DEC, "mode": "decode_none"}, "40x80"),
            _series(GRAPH, {**DEC, "mode": "decode_cuda_graph"}, "0+50x80"),
        ],
        "6m",
        [],
    ),
    # The rank-0-idle wedge: gauges read idle (running 0), the idle counter and the progress
    # counter both stand still (the loop blocks in its next TP broadcast).
    (
        "DSV4DecodeLoopStalled",
        [
            _series(IDLE, DEC, "0+5x4 20x36"),
            _series("sglang:num_running_reqs", DEC, "0x40"),
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "0+300x4 1200x36"),
        ],
        "2m",
        [_expect("DSV4DecodeLoopStalled", {"instance": DEC["instance"]})],
    ),
    # Blocked before its first decode batch: no progress series yet.
    (
        "DSV4DecodeLoopStalled",
        [_series(IDLE, DEC, "3x40")],
        "2m",
        [_expect("DSV4DecodeLoopStalled", {"instance": DEC["instance"]})],
    ),
    ("DSV4DecodeLoopStalled", [_series(IDLE, DEC, "0+5x40")], "2m", []),  # healthy and idle
    (
        "DSV4DecodeLoopStalled",
        [
            _series(IDLE, DEC, "3x40"),  # busy: decoding, never idle
            _series("sglang:realtime_tokens_total", {**DEC, "mode": "decode"}, "0+300x40"),
        ],
        "2m",
        [],
    ),
]


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_wedge_window_spans_two_log_intervals_at_the_slowest_step_and_four_scrapes() -> None:
    assert S.wedge_window_s() == 20.0  # 4 scrapes of 5 s > 2 x 40 x 150 ms
    slow = RuleSettings(scrape_interval_s=1.0, max_step_ms=200.0)
    assert slow.wedge_window_s() == 16.0  # 2 x 40 x 200 ms
    assert duration(20.0) == "20s" and duration(20.0, 0.1) == "2s" and duration(0.25) == "250ms"


def test_no_rule_judges_a_wedge_by_throughput() -> None:
    for rule in alert_rules(S)["groups"][0]["rules"]:
        assert "gen_throughput" not in rule["expr"], rule["alert"]


def test_the_shipped_rules_are_the_render_of_baseline_for_the_box() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", "monitoring", "render", "baseline", "--target", "box"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (REPO / "monitoring" / "dsv4ops-alerts.yml").read_text(), (
        "monitoring/dsv4ops-alerts.yml is stale: dsv4ops monitoring render baseline --target box "
        "> monitoring/dsv4ops-alerts.yml"
    )


@needs_promtool
def test_promtool_checks_the_shipped_rules_and_a_rendered_config(tmp_path: Path) -> None:
    out = _promtool("check", "rules", str(REPO / "monitoring" / "dsv4ops-alerts.yml"), cwd=tmp_path)
    assert out.returncode == 0 and "SUCCESS: 8 rules found" in out.stdout, out.stdout + out.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "monitoring",
            "render",
            "baseline",
            "--target",
            "twin-local",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    out = _promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    config = _yaml.safe_load((tmp_path / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j["static_configs"][0]["targets"][0] for j in config["scrape_configs"]}
    assert jobs == {
        "dsv4-prefill": "127.0.0.1:31000",
        "dsv4-decode": "127.0.0.1:31001",
        "dsv4-router": "127.0.0.1:30000",
    }  # the twin-local render's ports


@needs_promtool
@pytest.mark.parametrize(
    "case",
    range(len(CASES)),
    ids=[f"{c[0]}-{'fires' if c[3] else 'quiet'}-{i}" for i, c in enumerate(CASES)],
)
def test_promtool_unit_test_per_alert(case: int, tmp_path: Path) -> None:
    alert, series, at, expected = CASES[case]
    (tmp_path / "rules.yml").write_text(_yaml.dump(alert_rules(S)))
    tests = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "5s",
        "tests": [
            {
                "interval": "5s",
                "input_series": series,
                "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": expected}],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(_yaml.dump(tests))
    out = _promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
