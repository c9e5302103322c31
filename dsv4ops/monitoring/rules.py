"""Prometheus alert rules for the PD unit, from the server and router metrics alone.

No dsv4ops process is needed to evaluate them: they read what SGLang 0.5.23 and the profile's
router export (sglang-router 0.3.2 or SMG 1.13.0: `RuleSettings.router_kind`, whose names
routerkind.py maps; `dsv4ops monitoring render` writes them with a scrape config). Each rule encodes a
fact of the real metrics, not of a cleaner signal:

* `sglang:gen_throughput` and `num_running_reqs` are last-published gauges: a blocked scheduler
  keeps running > 0 and throughput > 0 (twin-vs-sglang §3), so a wedge is "running > 0 while the
  progress counter `realtime_tokens_total{mode="decode"}` does not move", never "throughput 0".
  The counter moves every decode iteration in 0.5.23's code (at worst, its help text says, every
  `--decode-log-interval` iterations), so the window spans at least two log intervals at the
  slowest step and four scrapes.
* In SGLang's multiprocess mode a labelled counter appears only at its first increment: a
  failure counter born at 1 is a failure that `increase()` cannot see, so the failure rules also
  fire on a series that is new within the window and already > 0.
* `sglang:scheduler_idle_seconds_total` grows about once a second while the loop idles and
  stands still while it is blocked; with the progress counter also still, the decode loop is
  neither idling nor decoding: a wedge whichever side rank 0 is on (its gauges may read idle).
* The decode's `/health` never exercises KV transfer (fake bootstrap host): transfers can fail
  while every health check is green, which is what `DSV4PDErrorsWhileHealthy` says.

Durations are in MODEL seconds; `time_scale` turns them into the wall seconds of a scaled twin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind

RUNBOOKS = {
    "wedge": "runbooks/decode-wedge.md",
    "degrade": "runbooks/bootstrap-degradation.md",
    "restart": "runbooks/README.md",  # status first; the pair is restarted as one unit
}


class AlertLabels(TypedDict):
    severity: str
    component: str


class AlertAnnotations(TypedDict):
    summary: str
    evidence: str
    runbook: str


# One rule of the file, its keys in the order they are written ("for" is a keyword).
Alert = TypedDict(
    "Alert",
    {"alert": str, "expr": str, "for": str, "labels": AlertLabels, "annotations": AlertAnnotations},
)


class RuleGroup(TypedDict):
    name: str
    rules: list[Alert]


class RuleFile(TypedDict):
    """dsv4ops-alerts.yml."""

    groups: list[RuleGroup]


@dataclass(frozen=True)
class RuleSettings:
    scrape_interval_s: float = 5.0
    decode_log_interval: int = 40  # SGLang's default --decode-log-interval
    max_step_ms: float = 150.0  # slowest decode step to allow for (seeds: ~18 + 1.05*96 ms)
    wedge_for_s: float = 60.0
    failure_window_s: float = 300.0
    queue_stuck_for_s: float = 120.0
    down_for_s: float = 60.0
    eager_for_s: float = 300.0
    max_decode_bucket: int | None = None  # the largest captured CUDA-graph batch, if known
    time_scale: float = 1.0  # wall seconds per model second (a scaled twin)
    # Where the runbooks are published (e.g. https://git.example.com/ops/dsv4ops/blob/main): the
    # alerts' `runbook` annotation is BASE/runbooks/NAME.md, a link Alertmanager and Grafana can
    # open. None: the path relative to the project (what the shipped rules say).
    runbook_url: str | None = None
    router_kind: RouterKind = DEFAULT_ROUTER_KIND  # whose metric names the router rules read

    def runbook(self, path: str) -> str:
        return f"{self.runbook_url.rstrip('/')}/{path}" if self.runbook_url else path

    def wedge_window_s(self) -> float:
        """Model seconds over which a moving decode counter must have moved."""
        log_interval_s = self.decode_log_interval * self.max_step_ms / 1000.0
        return max(2 * log_interval_s, 4 * self.scrape_interval_s)


def duration(model_s: float, time_scale: float = 1.0) -> str:
    """A Prometheus duration for `model_s` model seconds at `time_scale` (ms resolution)."""
    ms = max(1, math.ceil(model_s * time_scale * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _alert(
    name: str, expr: str, for_: str, severity: str, summary: str, runbook: str, evidence: str
) -> Alert:
    # one line: PromQL does not care, and YAML folds multi-line scalars unreadably
    return {
        "alert": name,
        "expr": " ".join(expr.split()),
        "for": for_,
        "labels": {"severity": severity, "component": "dsv4-pd"},
        "annotations": {"summary": summary, "evidence": evidence, "runbook": runbook},
    }


def _new_and_positive(metric: str, window: str) -> str:
    """A counter series that was born within the window at a value > 0, on an instance that was
    already being scraped then (so a Prometheus restart does not look like a new failure)."""
    return (
        f"sum by (instance, engine_type) ((({metric} unless {metric} offset {window}) > 0)"
        f" and on (instance) (up offset {window} == 1))"
    )


def alert_rules(s: RuleSettings) -> RuleFile:
    """The rule file as a mapping (dump it with `_yaml.dump`)."""
    t = s.time_scale
    w_wedge = duration(s.wedge_window_s(), t)
    w_fail = duration(s.failure_window_s, t)
    running = 'max by (instance) (sglang:num_running_reqs{engine_type="decode"})'
    progress = 'sglang:realtime_tokens_total{engine_type="decode",mode="decode"}'
    rules = [
        _alert(
            "DSV4DecodeWedged",
            f"({running} > 0)\n"
            f"and on (instance) (sum by (instance) (increase({progress}[{w_wedge}])) == 0)\n"
            f"or ({running} > 0) unless on (instance) {progress}",
            duration(s.wedge_for_s, t),
            "critical",
            "decode {{ $labels.instance }} has running requests but decodes no tokens",
            RUNBOOKS["wedge"],
            "num_running_reqs > 0 (a last-published gauge: it freezes in a wedge) while "
            f"realtime_tokens_total{{mode=decode}} did not move for {w_wedge}",
        ),
        _alert(
            "DSV4PDTransferFailing",
            "sum by (instance, engine_type) "
            f"(increase(sglang:num_transfer_failed_reqs_total[{w_fail}])) > 0\n"
            "or sum by (instance, engine_type) "
            f"(increase(sglang:num_bootstrap_failed_reqs_total[{w_fail}])) > 0\n"
            f"or {_new_and_positive('sglang:num_transfer_failed_reqs_total', w_fail)}\n"
            f"or {_new_and_positive('sglang:num_bootstrap_failed_reqs_total', w_fail)}",
            "0s",
            "warning",
            "{{ $labels.engine_type }} {{ $labels.instance }}: KV transfers or bootstraps failing",
            RUNBOOKS["degrade"],
            f"transfer/bootstrap failure counters rose within {w_fail} (bumped on both sides)",
        ),
        _errors_while_healthy(s, w_fail),
        _alert(
            "DSV4PDQueueStuck",
            "max by (instance, engine_type) (sglang:num_prefill_bootstrap_queue_reqs"
            " or sglang:num_decode_transfer_queue_reqs) > 0\n"
            "and on (instance) sum by (instance) "
            f"(increase(sglang:realtime_tokens_total[{w_wedge}])) == 0",
            duration(s.queue_stuck_for_s, t),
            "warning",
            "{{ $labels.engine_type }} {{ $labels.instance }}: PD bootstrap/transfer queue "
            "never empties",
            RUNBOOKS["degrade"],
            "requests waiting in the bootstrap or transfer queue while that server's progress "
            "counter does not move (a transfer takes milliseconds; SGLang's timeout is 300 s)",
        ),
    ]
    rules += [*_down_alerts(s), _loop_stalled(s, w_wedge), _eager_fallback(s, w_wedge)]
    for rule in rules:
        rule["annotations"]["runbook"] = s.runbook(rule["annotations"]["runbook"])
    return {"groups": [{"name": "dsv4ops-pd", "rules": rules}]}


def _errors_while_healthy(s: RuleSettings, window: str) -> Alert:
    m = s.router_kind.metrics
    own = f" (not its own {', '.join(m.own_paths)} answers)" if m.own_paths else ""
    return _alert(
        "DSV4PDErrorsWhileHealthy",
        f"sum(increase({m.client_5xx()}[{window}])) > 0\n"
        f"and on () (min({m.worker_health}) == 1)",
        "0s",
        "warning",
        "the router returns 5xx while every worker's health check passes",
        RUNBOOKS["degrade"],
        f"router 5xx responses{own} with {m.worker_health} == 1 for every worker: /health uses "
        "a fake bootstrap host and never exercises KV transfer",
    )


def _down_alerts(s: RuleSettings) -> list[Alert]:
    """A component that stopped answering: its metrics scrape fails, or the router marks it."""
    t = s.time_scale
    return [
        _alert(
            "DSV4ComponentDown",
            'up{job=~"dsv4-(prefill|decode|router)"} == 0',
            duration(s.down_for_s, t),
            "critical",
            "{{ $labels.job }} {{ $labels.instance }} does not answer its metrics scrape",
            RUNBOOKS["restart"],
            "the scrape of the component failed",
        ),
        _alert(
            "DSV4RouterWorkerUnhealthy",
            f"{s.router_kind.metrics.worker_health} == 0",
            duration(s.down_for_s, t),
            "critical",
            "the router marks worker {{ $labels.worker }} unhealthy",
            RUNBOOKS["restart"],
            f"{s.router_kind.metrics.worker_health} == 0 (router health checks failing)",
        ),
    ]


def check_runbook_url(url: str) -> str:
    """The base of the runbook links: an http(s) URL, as an alert's link must open in a browser.
    Raises ValueError naming what is wrong."""
    if not url.startswith(("https://", "http://")) or len(url) > 500:
        raise ValueError("expected an http:// or https:// URL (at most 500 characters)")
    # "{" and "}": Prometheus reads an annotation as a Go template, and `{{` in a link
    # would make it refuse the whole rules file at its next reload
    if any(c.isspace() or c in "\"'<>`{}" or ord(c) < 32 for c in url):
        raise ValueError("spaces, quotes, <, >, {, } and control characters are not allowed in it")
    return url


def _loop_stalled(s: RuleSettings, window: str) -> Alert:
    idle = 'sglang:scheduler_idle_seconds_total{engine_type="decode"}'
    progress = 'sglang:realtime_tokens_total{engine_type="decode",mode="decode"}'
    return _alert(
        "DSV4DecodeLoopStalled",
        f"(sum by (instance) (increase({idle}[{window}])) == 0)\n"
        "and on (instance) ("
        f"(sum by (instance) (increase({progress}[{window}])) == 0)\n"
        f"or on (instance) (sum by (instance) ({idle}) unless on (instance) {progress}))",
        duration(s.wedge_for_s, s.time_scale),
        "critical",
        "decode {{ $labels.instance }}: its scheduler loop neither idles nor decodes",
        RUNBOOKS["wedge"],
        f"scheduler_idle_seconds_total and realtime_tokens_total{{mode=decode}} both stood still "
        f"for {window}: a blocked loop (either side of the TP desync; rank 0's gauges may read "
        "idle)",
    )


def _eager_fallback(s: RuleSettings, window: str) -> Alert:
    passes = 'sglang:cuda_graph_passes_total{engine_type="decode"'
    bucket = f" ({s.max_decode_bucket})" if s.max_decode_bucket is not None else ""
    return _alert(
        "DSV4DecodeEagerFallback",
        f'sum by (instance) (increase({passes},mode="decode_none"}}[{window}])) > 0\n'
        f'and on (instance) sum by (instance) ({passes},mode="decode_cuda_graph"}}) > 0',
        duration(s.eager_for_s, s.time_scale),
        "warning",
        f"decode batches above the largest CUDA-graph bucket{bucket} run eager",
        "runbooks/flag-change.md",
        'cuda_graph_passes_total{mode="decode_none"} rising on a decode that captured graphs '
        "(0.5.23 counts every decode pass, batch_result_processor.py L994)",
    )
