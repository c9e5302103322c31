"""The runbook engine's view of a target: preconditions, waits and diagnostics.

Built by the CLI from a target session (supervisor, journal) and `dsv4ops status`'s report
(injected: orchestrate sits in this layer). Every check goes through the remote seam: HTTP is
made from the target side, process state comes from the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dsv4ops.apikey import auth_headers
from dsv4ops.clock import Clock, SystemClock
from dsv4ops.component import UNREAD
from dsv4ops.deployment import START_ORDER, Component
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.store import Journal
from dsv4ops.metrics.prom import (
    METRICS_READ_CAP_BYTES,
    MetricsParseError,
    oversized_why,
    parse_text,
    server_gauges,
)
from dsv4ops.remote import Supervisor
from dsv4ops.remote.results import HttpRequest
from dsv4ops.runbooks.diagnostics import collect
from dsv4ops.runbooks.model import Condition
from dsv4ops.runbooks.preconditions import ComponentSnapshot, Snapshot

POLL_S = 0.25


class TargetWorld:
    def __init__(
        self,
        supervisor: Supervisor,
        journal: Journal,
        *,
        target: str,
        status: Callable[[], Mapping[str, object]],  # status's report: its `healthy` is read
        clock: Clock | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.journal = journal
        self.target = target
        self.status = status
        self.clock = clock or SystemClock()

    def snapshot(self) -> Snapshot:
        """The preconditions in two agent round trips (process states; every health and
        metrics request at once): it is taken before every step."""
        try:
            return self._snapshot()
        except DsOpsError as exc:
            return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}

    def _snapshot(self) -> Snapshot:
        current = self.journal.deployed()
        # what status reads (its URLs): a damaged stop grace or key reference is status's finding
        deployed = current.deployment(unread=UNREAD) if current and current.components else None
        states = self.supervisor.status(list(START_ORDER))
        urls: list[tuple[str, str, str]] = []  # component, what, url
        if deployed is not None:
            for name in START_ORDER:
                spec = deployed.component(name)
                if name == "router":
                    urls.append((name, "health", spec.url("/readiness")))
                else:
                    urls += [
                        (name, "health", spec.url("/health")),
                        (name, "metrics", spec.url("/metrics")),
                    ]
        reads: list[HttpRequest] = [
            {"url": u, "max_bytes": METRICS_READ_CAP_BYTES} if what == "metrics" else {"url": u}
            for _, what, u in urls
        ]
        replies = self.supervisor.http_many(reads, timeout_s=5.0) if reads else []
        components: dict[str, ComponentSnapshot] = {
            n: {"alive": bool(states[n].alive), "healthy": False, "running": None, "queued": None}
            for n in START_ORDER
        }
        for (name, what, _), reply in zip(urls, replies, strict=True):
            row = components[name]
            if what == "health":
                row["healthy"] = row["alive"] and reply.status == 200
            elif reply.status == 200 and not reply.oversized:
                try:
                    g = server_gauges(parse_text(reply.body))
                except MetricsParseError:
                    continue
                row["running"], row["queued"] = g.running, g.queued
        p = (current.profile or {}) if current else {}
        return {
            "healthy": deployed is not None and all(c["healthy"] for c in components.values()),
            "components": components,
            "deployed": {
                "op": current.op if current else None,
                "profile": p.get("name"),
                "commit": p.get("git_commit"),
            },
        }

    def wait(self, conditions: Sequence[Condition], timeout_s: float) -> tuple[bool, str]:
        """Poll until every condition holds at once; (held, what was last seen)."""
        deadline = self.clock.monotonic() + timeout_s
        start = self.clock.monotonic()
        while True:
            seen = [self.check(c) for c in conditions]
            if all(ok for ok, _ in seen):
                took = self.clock.monotonic() - start
                return True, f"held after {took:.1f} s: " + "; ".join(t for _, t in seen)
            if self.clock.monotonic() >= deadline:
                return False, f"after {timeout_s:g} s: " + "; ".join(t for ok, t in seen if not ok)
            self.clock.sleep(POLL_S)

    def check(self, c: Condition) -> tuple[bool, str]:
        """One condition now: (holds, what was seen)."""
        if c.kind == "status":
            report = self.status()
            return bool(report.get("healthy")), (
                "status HEALTHY" if report.get("healthy") else "status NOT HEALTHY"
            )
        if c.kind == "process":
            state = self.supervisor.status([c.component])[c.component]
            now = "alive" if state.alive else "dead"
            return now == c.state, f"{c.component} process {now}"
        comp = self._component(c.component)
        if comp is None:
            return False, f"{c.component}: the journal records no deployed component"
        path = "/metrics" if c.kind == "metric" else c.path
        # a router that requires a key gets it, as from every client of the router
        read: HttpRequest = {"url": comp.url(path), "headers": auth_headers(comp.api_key)}
        if c.kind == "metric":
            read["max_bytes"] = METRICS_READ_CAP_BYTES
        (reply,) = self.supervisor.http_many([read], timeout_s=5.0)
        if c.kind == "http":
            return (
                reply.status in c.codes,
                f"{c.component} {c.path} -> {reply.status or reply.error}",
            )
        if reply.oversized:
            return False, oversized_why(c.component)
        if reply.status != 200:
            return False, f"{c.component} /metrics -> {reply.status or reply.error}"
        try:
            value = parse_text(reply.body).total(c.series, **dict(c.labels))
        except MetricsParseError as exc:
            return False, f"{c.component} /metrics unreadable: {exc}"
        if value is None:
            return False, f"{c.component} {c.series}: absent"
        return c.holds(value), f"{c.component} {c.series} = {value:g}"

    def _component(self, component: str) -> Component | None:
        current = self.journal.deployed()
        if current is None or not current.components:
            return None
        # its checks send the router's key; they stop nothing (the grace is not read)
        return current.deployment(unread=("stop_grace_s",)).component(component)

    def diagnostics(self, run_id: str, max_bytes: int) -> str:
        root = collect(
            self.supervisor,
            self.journal,
            target=self.target,
            run_id=run_id,
            max_bytes=max_bytes,
            clock=self.clock,
        )
        return str(root)
