"""Watch's own Prometheus endpoint: the findings as gauges (prometheus_client), so an existing
Prometheus can alert on what watch saw, probes included, which the server metrics cannot show.

`dsv4ops_watch_finding{code,component,severity,runbook}` is 1 while a finding is active (a
label set disappears when it clears), `dsv4ops_watch_worst_severity` is 0/1/2 like `--once`'s exit
code, `dsv4ops_watch_component_up{component}` is whether its /metrics answered, and
`dsv4ops_watch_rounds_total` counts rounds.
"""

from __future__ import annotations

from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from dsv4ops.watch.loop import Round


class FindingsExporter:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.finding = Gauge(
            "dsv4ops_watch_finding",
            "An active watch finding (1 while active).",
            ["code", "component", "severity", "runbook"],
            registry=self.registry,
        )
        self.worst = Gauge(
            "dsv4ops_watch_worst_severity",
            "Worst active finding: 0 ok, 1 warning, 2 critical.",
            registry=self.registry,
        )
        self.up = Gauge(
            "dsv4ops_watch_component_up",
            "Whether the component's /metrics answered.",
            ["component"],
            registry=self.registry,
        )
        self.rounds = Counter("dsv4ops_watch_rounds", "Watch rounds done.", registry=self.registry)
        self._active: set[tuple[str, str, str, str]] = set()
        self._server: WSGIServer | None = None

    def update(self, r: Round) -> None:
        now = {
            (f.code, f.component, f.severity.name.lower(), f"runbooks/{f.runbook}.md")
            for f in r.findings
        }
        for labels in self._active - now:
            self.finding.remove(*labels)
        for labels in now:
            self.finding.labels(*labels).set(1)
        self._active = now
        self.worst.set(int(r.worst))
        for name, s in r.scrape.servers.items():
            self.up.labels(name).set(1 if s.up else 0)
        self.up.labels("router").set(1 if r.scrape.router.up else 0)
        self.rounds.inc()

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve /metrics on addr:port (0: a free port); returns the port."""
        self._server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
