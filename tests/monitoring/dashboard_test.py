"""The Grafana dashboard: the shipped JSON is the render, every PromQL expression parses (real
`promtool check rules` on the expressions wrapped as recording rules), and every metric it
names is one SGLang 0.5.23 declares (the real wheel's surface, tests/twin/fixtures), that the
twin and the profile's real router (sglang-router 0.3.2, or SMG 1.13.0 from its own venv) export
when scraped, or that watch's exporter serves."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from dsv4ops import _yaml
from dsv4ops.metrics.prom import parse_text
from dsv4ops.monitoring.dashboard import dashboard, expressions
from dsv4ops.routerkind import RouterKind
from dsv4ops.watch.exporter import FindingsExporter
from testing.twin import DEFAULT_MODEL_PATH, twin_stack

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "monitoring" / "dsv4ops-dashboard.json"
SURFACE = REPO / "tests" / "twin" / "fixtures" / "sglang_0_5_23_surface.json"
PROMTOOL = shutil.which("promtool")
KEYWORDS = {
    "sum",
    "max",
    "min",
    "rate",
    "increase",
    "clamp_min",
    "vector",
    "by",
    "on",
    "and",
    "or",
    "unless",
}


def _metric_names(expr: str) -> set[str]:
    bare = re.sub(r'"[^"]*"|\b\d+(\.\d+)?(e-?\d+)?\b', " ", expr)  # strings, numbers
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(by|on|without|ignoring)\s*\([^)]*\)", " ", bare)
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_:]*", bare)) - KEYWORDS
    unknown = {n for n in names if not n.startswith(("sglang:", "smg_", "dsv4ops_watch_"))}
    assert not unknown, f"{expr}: not a metric or a known function: {unknown}"
    return names


def _family(name: str) -> str:
    return re.sub(r"_(total|sum|count|bucket)$", "", name)


NAMES = {n for e in expressions(dashboard(max_bucket=96)) for n in _metric_names(e)}


def test_the_shipped_dashboard_is_the_render_of_baseline_for_the_box(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "monitoring",
            "render",
            "baseline",
            "--target",
            "box",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dsv4ops-dashboard.json").read_text() == SHIPPED.read_text(), (
        "monitoring/dsv4ops-dashboard.json is stale: dsv4ops monitoring render baseline "
        "--target box --out DIR, then copy DIR/dsv4ops-dashboard.json"
    )
    board = json.loads(SHIPPED.read_text())
    assert "vector(96)" in expressions(board) and "18 + 1.05 * " in " ".join(expressions(board))


@pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("CI"),
    reason="promtool missing: `make install` installs Debian's prometheus",
)
def test_every_expression_parses_with_promtool(tmp_path: Path) -> None:
    exprs = expressions(json.loads(SHIPPED.read_text()))
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dsv4ops:dashboard_expr_{i}", "expr": e}
                    for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    (tmp_path / "rules.yml").write_text(_yaml.dump(rules))
    assert PROMTOOL is not None
    out = subprocess.run(
        [PROMTOOL, "check", "rules", "rules.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and f"SUCCESS: {len(exprs)} rules found" in out.stdout, (
        out.stdout + out.stderr
    )


def test_sglang_names_are_declared_by_0_5_23() -> None:
    surface = {_family(m["name"]) for m in json.loads(SURFACE.read_text())["metrics"]}
    sglang = {_family(n) for n in NAMES if n.startswith("sglang:")}
    assert sglang and sglang <= surface, sglang - surface


@pytest.mark.router
@pytest.mark.parametrize("kind", list(RouterKind), ids=str)
def test_every_name_is_exported_by_the_twin_the_real_router_or_watch(kind: RouterKind) -> None:
    names = {n for e in expressions(dashboard(router_kind=kind)) for n in _metric_names(e)}
    decode = ["--enable-metrics", "--tool-call-parser", "deepseekv4"]
    with twin_stack(
        router=True, router_kind=kind, prefill_args=["--enable-metrics"], decode_args=decode
    ) as st:
        assert st.router is not None
        httpx.post(
            st.router.url + "/v1/chat/completions",
            timeout=20,
            json={
                "model": DEFAULT_MODEL_PATH,  # SMG routes by the served model's id
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
                "chat_template_kwargs": {"thinking": False},
            },
        ).raise_for_status()
        exported: set[str] = set()
        for url in (
            st.prefill.url + "/metrics",
            st.decode.url + "/metrics",
            f"http://127.0.0.1:{st.router.prometheus_port}/metrics",
        ):
            exported |= parse_text(httpx.get(url, timeout=5).text).families
    watch = {m.name for m in FindingsExporter().registry.collect()}
    missing = {n for n in names if _family(n) not in exported | watch}
    assert not missing, missing
