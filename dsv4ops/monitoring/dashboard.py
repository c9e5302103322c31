"""The Grafana dashboard of the PD unit, rendered from the profile's step-time law and buckets.

Panels: decode step time against the batch with the fitted law `a + b*bs` drawn next to it,
decode throughput (the progress counter's rate, not the last-published `gen_throughput` alone),
queues, PD transfer failures with the router's 5xx, CUDA-graph passes (eager share against the
largest bucket), the router's worker health and `dsv4ops watch`'s findings. Every expression
uses only metrics SGLang 0.5.23, the profile's router (sglang-router 0.3.2 or SMG 1.13.0, by the
names routerkind.py maps) and watch's exporter export (a test checks each name against the real
wheel's surface and the twin behind the real router of each kind, and parses
each expression with `promtool`). No Grafana variables in expressions (`$__rate_interval`):
fixed windows keep them valid PromQL for that check; the datasource is the one variable.
"""

from __future__ import annotations

from typing import TypedDict

from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind


class Datasource(TypedDict):
    type: str
    uid: str


class Target(TypedDict):
    datasource: Datasource
    expr: str
    legendFormat: str
    refId: str


class Panel(TypedDict):
    """A timeseries panel, its keys in the order they are written (the fixed parts as plain data)."""

    id: int
    type: str
    title: str
    description: str
    datasource: Datasource
    gridPos: dict[str, int]
    fieldConfig: dict[str, object]
    options: dict[str, object]
    targets: list[Target]


# dsv4ops-dashboard.json; the fixed parts as plain data. Not a class: a class body would mangle
# "__inputs" to "_Dashboard__inputs".
Dashboard = TypedDict(  # noqa: UP013
    "Dashboard",
    {
        "__inputs": list[dict[str, str]],
        "title": str,
        "uid": str,
        "schemaVersion": int,
        "version": int,
        "editable": bool,
        "refresh": str,
        "time": dict[str, str],
        "tags": list[str],
        "templating": dict[str, object],
        "panels": list[Panel],
    },
)

DS: Datasource = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
DEC = 'engine_type="decode"'
RUNNING = f"max(sglang:num_running_reqs{{{DEC}}})"


def _target(expr: str, legend: str, ref: str) -> Target:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(
    pid: int,
    title: str,
    unit: str,
    targets: list[tuple[str, str]],
    x: int,
    y: int,
    description: str,
) -> Panel:
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [_target(e, legend, chr(ord("A") + i)) for i, (e, legend) in enumerate(targets)],
    }


def _panels(a_ms: float, b_ms: float, max_bucket: int | None, router: RouterKind) -> list[Panel]:
    return [
        *_decode_panels(a_ms, b_ms),
        *_pd_panels(router),
        *_graph_and_worker_panels(max_bucket, router),
    ]


def _decode_panels(a_ms: float, b_ms: float) -> list[Panel]:
    """Row 1: the decode's step time against the fitted law, and its throughput."""
    itl = "sglang:inter_token_latency_seconds"
    step = (
        f"1000 * sum(rate({itl}_sum{{{DEC}}}[1m])) / "
        f"clamp_min(sum(rate({itl}_count{{{DEC}}}[1m])), 1e-9)"
    )
    return [
        _panel(
            1,
            "Decode step time vs batch (fitted law)",
            "ms",
            [
                (step, "measured step (mean inter-token latency)"),
                (f"{a_ms:g} + {b_ms:g} * {RUNNING}", f"law {a_ms:g} ms + {b_ms:g} ms x running"),
                (RUNNING, "running batch (last published)"),
            ],
            0,
            0,
            "Mean inter-token latency against the law the canary's sweep fitted; a measured "
            "line above the law at the same batch is eager fallback, kernels or overlap.",
        ),
        _panel(
            2,
            "Decode throughput",
            "short",
            [
                (
                    f'sum(rate(sglang:realtime_tokens_total{{{DEC},mode="decode"}}[1m]))',
                    "decode tokens/s (progress counter)",
                ),
                (
                    f"sum(sglang:gen_throughput{{{DEC}}})",
                    "gen_throughput (last published: freezes " "in a wedge)",
                ),
            ],
            12,
            0,
            "The progress counter's rate stops in a wedge; gen_throughput keeps its last value.",
        ),
    ]


def _pd_panels(router: RouterKind) -> list[Panel]:
    """Row 2: the PD queues and transfer failures, where a lost request shows first."""
    return [
        _panel(
            3,
            "Queues",
            "short",
            [
                ("sum by (engine_type) (sglang:num_running_reqs)", "running {{engine_type}}"),
                ("sum by (engine_type) (sglang:num_queue_reqs)", "waiting {{engine_type}}"),
                ("sum(sglang:num_prefill_bootstrap_queue_reqs)", "prefill bootstrap"),
                ("sum(sglang:num_prefill_inflight_queue_reqs)", "prefill inflight"),
                ("sum(sglang:num_decode_prealloc_queue_reqs)", "decode prealloc"),
                ("sum(sglang:num_decode_transfer_queue_reqs)", "decode transfer"),
            ],
            0,
            8,
            "A PD queue that holds requests while the progress counter is still is stuck.",
        ),
        _panel(
            4,
            "PD transfer failures",
            "short",
            [
                (
                    "sum by (engine_type) (increase(sglang:num_transfer_failed_reqs_total[5m]))",
                    "transfer failed {{engine_type}}",
                ),
                (
                    "sum by (engine_type) (increase(sglang:num_bootstrap_failed_reqs_total[5m]))",
                    "bootstrap failed {{engine_type}}",
                ),
                (f"sum(increase({router.metrics.client_5xx()}[5m]))", "router 5xx"),
            ],
            12,
            8,
            "Both sides count failures; /health never exercises the KV transfer.",
        ),
    ]


def _graph_and_worker_panels(max_bucket: int | None, router: RouterKind) -> list[Panel]:
    """Row 3: CUDA-graph passes against the largest bucket, and the router's and watch's view."""
    bucket = [(f"vector({max_bucket})", "largest CUDA-graph bucket")] if max_bucket else []
    return [
        _panel(
            5,
            "CUDA graph passes",
            "short",
            [
                (f"sum by (mode) (rate(sglang:cuda_graph_passes_total{{{DEC}}}[1m]))", "{{mode}}"),
                (RUNNING, "running batch (last published)"),
                *bucket,
            ],
            0,
            16,
            "decode_none passes ran eager: a batch above the largest captured bucket.",
        ),
        _panel(
            6,
            "Router workers and watch findings",
            "short",
            [
                (router.metrics.worker_health, "healthy {{worker}}"),
                (
                    "sum by (code, severity) (dsv4ops_watch_finding)",
                    "watch: {{code}} ({{severity}})",
                ),
                ("max(dsv4ops_watch_worst_severity)", "watch worst (0 ok, 1 warn, 2 crit)"),
            ],
            12,
            16,
            f"{router.metrics.worker_health} from {router.label}; findings from "
            "`dsv4ops watch --prometheus-port`.",
        ),
    ]


def dashboard(
    *,
    a_ms: float = 18.0,
    b_ms: float = 1.05,
    max_bucket: int | None = None,
    router_kind: RouterKind = DEFAULT_ROUTER_KIND,
    title: str = "DSV4 PD unit",
) -> Dashboard:
    """The dashboard JSON (import it into Grafana; it asks for the Prometheus datasource)."""
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "title": title,
        "uid": "dsv4ops-pd",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "tags": ["dsv4ops", "sglang", "pd"],
        "templating": {"list": []},
        "panels": _panels(a_ms, b_ms, max_bucket, router_kind),
    }


def expressions(board: Dashboard) -> list[str]:
    """Every PromQL expression of the dashboard, in panel order."""
    return [t["expr"] for p in board["panels"] for t in p["targets"]]
