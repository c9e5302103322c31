"""Watch's own Prometheus endpoint, scraped over real HTTP and parsed by prometheus_client: an
active finding is a labelled 1, a cleared one disappears, the worst severity is a gauge."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from dsv4ops.watch import Watcher, WatchSettings
from dsv4ops.watch.exporter import FindingsExporter
from testing.clock import FakeClock
from testing.watch import ENDPOINTS, FakeUnit


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_findings_are_exported_while_active() -> None:
    unit = FakeUnit(probe="corrupt")
    w = Watcher(ENDPOINTS, WatchSettings(failure_window_s=10), unit, FakeClock())
    exporter = FindingsExporter()
    port = exporter.serve(0)
    try:
        exporter.update(w.tick())
        m = _scrape(port)
        assert m["dsv4ops_watch_finding"] == [
            (
                {
                    "code": "tool_call_corruption",
                    "component": "decode",
                    "severity": "critical",
                    "runbook": "runbooks/tool-call-corruption.md",
                },
                1.0,
            )
        ]
        assert m["dsv4ops_watch_worst_severity"] == [({}, 2.0)]
        assert ({"component": "router"}, 1.0) in m["dsv4ops_watch_component_up"]
        unit.probe = "ok"
        w.clock.sleep(30)  # past the window, and a probe round is due again
        exporter.update(w.tick())
        m = _scrape(port)
        assert "dsv4ops_watch_finding" not in m
        assert m["dsv4ops_watch_worst_severity"] == [({}, 0.0)]
        assert m["dsv4ops_watch_rounds_total"] == [({}, 2.0)]
    finally:
        exporter.close()
