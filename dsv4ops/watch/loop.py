"""The watch loop: scrape every `interval`, probe every `probe_every`, detect, emit. Behind the
clock seam (`dsv4ops.clock`) and an injected HTTP client, so a fake clock and scripted replies
test it; it only ever reads (GET /metrics, GET /health, probe generations): it never restarts
or changes anything.

One round is one `http_many` call: every scrape and, when due, the probes run concurrently (on
the target, through the agent, for local and ssh targets), so a round that carries probes takes
up to the probe timeout. The scrape's time is the round's start.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypedDict

from dsv4ops.clock import Clock, utc_now_iso
from dsv4ops.errors import DsOpsError
from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES
from dsv4ops.remote.results import HttpReply, HttpRequest
from dsv4ops.timings import TARGET_HTTP_S
from dsv4ops.watch.detect import Detector
from dsv4ops.watch.endpoints import WatchEndpoints
from dsv4ops.watch.findings import Finding, FindingRecord, Severity, worst
from dsv4ops.watch.probe import ProbeOutcome, ProbeRequest, judge, probe_requests
from dsv4ops.watch.readings import (
    Scrape,
    ServerReading,
    router_reading,
    server_reading,
)
from dsv4ops.watch.settings import WatchSettings
from dsv4ops.watch.stream import CONFIRM_GAP_S, SILENCE_S, StreamProbe

SCRAPE_TIMEOUT_S = 5.0  # wall seconds for a /metrics or /health answer
MIN_TIMEOUT_S = 2.0
POLL_S = 0.25  # how often the probe stream's silence is looked at between rounds


class HttpMany(Protocol):
    """Supervisor.http_many: the requests run concurrently, replies in order, no answer is a
    reply with status None."""

    def __call__(
        self, requests: Sequence[HttpRequest], *, timeout_s: float = TARGET_HTTP_S
    ) -> list[HttpReply]: ...


class ServerJSON(TypedDict):
    """A server's readings in a round (`watch --json`)."""

    up: bool
    error: str | None
    health: int | None
    running: float | None
    queued: float | None
    decode_tokens: float | None
    progress: float | None
    transfer_failed: float
    bootstrap_failed: float
    queues: dict[str, float]
    eager_passes: float | None


class RouterJSON(TypedDict):
    """The router's readings in a round."""

    up: bool
    error: str | None
    responses_5xx: float
    worker_health: dict[str, float]


class ProbeJSON(TypedDict):
    kind: str
    status: str
    detail: str
    elapsed_s: float


class RoundJSON(TypedDict):
    """One round as `watch --json` prints it, a line each (Round.to_json)."""

    round: int
    at: str
    worst: str
    unanswered: list[str]
    unproven: str | None
    components: dict[str, ServerJSON | RouterJSON]  # prefill, decode, router
    probes: list[ProbeJSON]
    findings: list[FindingRecord]


@dataclass(frozen=True)
class Round:
    """What one round saw and concluded (the terminal line, the JSON line, the exporter)."""

    number: int
    at: str  # UTC ISO time
    scrape: Scrape
    probes: tuple[ProbeOutcome, ...]
    findings: tuple[Finding, ...]
    # Set by `Watcher.once` when the whole watch had no probe answered through the router (with
    # probes on): scrapes alone do not show the unit serving, so the round cannot say "ok".
    unproven: str | None = None

    @property
    def worst(self) -> Severity:
        return worst(self.findings)

    @property
    def answered(self) -> bool:
        """Every component's scrape answered in this round."""
        return self.scrape.router.up and all(s.up for s in self.scrape.servers.values())

    @property
    def word(self) -> str:
        """ok | warning | critical | unknown, on positive evidence only: "ok" needs every
        component to have answered in this round (and, for `--once`, a probe through the
        router); a round in which something did not answer, with no finding yet, is "unknown"
        (a component is called down only after two silent scrapes). Its exit code:
        exitcodes.for_severity."""
        if self.worst is Severity.CRITICAL:
            return "critical"
        if self.worst is Severity.WARNING:
            return "warning"
        if not self.answered or self.unproven:
            return "unknown"
        return "ok"

    def to_json(self) -> RoundJSON:
        return {
            "round": self.number,
            "at": self.at,
            "worst": self.word,
            "unanswered": sorted(
                [n for n, s in self.scrape.servers.items() if not s.up]
                + ([] if self.scrape.router.up else ["router"])
            ),
            "unproven": self.unproven,
            "components": {
                **{n: _server_json(s) for n, s in self.scrape.servers.items()},
                "router": {
                    "up": self.scrape.router.up,
                    "error": self.scrape.router.error,
                    "responses_5xx": self.scrape.router.responses_5xx,
                    "worker_health": self.scrape.router.worker_health,
                },
            },
            "probes": [
                {
                    "kind": p.kind,
                    "status": p.status,
                    "detail": p.detail,
                    "elapsed_s": round(p.elapsed_s, 3),
                }
                for p in self.probes
            ],
            "findings": [f.to_json() for f in self.findings],
        }


def _server_json(s: ServerReading) -> ServerJSON:
    return {
        "up": s.up,
        "error": s.error,
        "health": s.health,
        "running": s.running,
        "queued": s.queued,
        "decode_tokens": s.decode_tokens,
        "progress": s.progress,
        "transfer_failed": s.transfer_failed,
        "bootstrap_failed": s.bootstrap_failed,
        "queues": s.queues,
        "eager_passes": s.eager_passes,
    }


@dataclass
class Watcher:
    endpoints: WatchEndpoints
    settings: WatchSettings
    http_many: HttpMany
    clock: Clock
    probe: bool = True
    stream: StreamProbe | None = None  # the probe stream (watch/stream.py), when one runs
    # The scrapes' client when it is quicker than `http_many` (a local target: GETs from this
    # machine, not an agent process per round, whose start-up on a loaded machine took seconds
    # and held the stream's confirmation back); the probes still go through `http_many`.
    scrape_http: HttpMany | None = None
    detector: Detector = field(init=False)
    rounds: int = field(default=0, init=False)
    _next_probe: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.detector = Detector(self.settings)

    def _scrape_requests(self, health: bool = True) -> list[HttpRequest]:
        e = self.endpoints
        cap = METRICS_READ_CAP_BYTES
        reqs: list[HttpRequest] = [{"url": e.metrics[n], "max_bytes": cap} for n in e.metrics]
        if health:  # a wedged decode's /health hangs for SGLang's 20 s: no confirming round waits
            reqs += [{"url": e.health[n]} for n in e.metrics]
        return [*reqs, {"url": e.router_metrics_url, "max_bytes": cap}]

    def _probe_due(self, now: float) -> bool:
        return self.probe and (self._next_probe is None or now >= self._next_probe)

    def tick(self, *, confirm: bool = False) -> Round:
        """One round: scrape (and probe when due), detect. Returns what it saw. `confirm`: a
        round the probe stream's silence asked for, a scrape only (no probes: it must be quick)."""
        now = self.clock.monotonic()
        probes: list[ProbeRequest] = []
        if self._probe_due(now) and not confirm:
            probes = probe_requests(
                self.endpoints.model, self.rounds, tool_call=self.settings.tool_calls
            )
            self._next_probe = now + self.settings.wall(self.settings.probe_every_s)
        # HTTP and the agent's start-up are wall time on any twin: never scaled below 2 s
        scrape_timeout = min(
            SCRAPE_TIMEOUT_S, max(MIN_TIMEOUT_S, self.settings.wall(self.settings.interval_s))
        )
        reqs: list[HttpRequest] = [
            {**r, "timeout_s": scrape_timeout} for r in self._scrape_requests(not confirm)
        ]
        probe_timeout = max(MIN_TIMEOUT_S, self.settings.wall(self.settings.probe_timeout_s))
        reqs += [
            {
                "url": self.endpoints.router_url + "/v1/chat/completions",
                "method": "POST",
                "body": json.dumps(p.body),
                "headers": {"Content-Type": "application/json", **self.endpoints.router_headers},
                "timeout_s": probe_timeout,
            }
            for p in probes
        ]
        try:
            if self.scrape_http is not None:
                n_scrapes = len(self._scrape_requests(not confirm))
                replies = self.scrape_http(reqs[:n_scrapes], timeout_s=scrape_timeout)
                if reqs[n_scrapes:]:
                    replies += self.http_many(reqs[n_scrapes:], timeout_s=scrape_timeout)
            else:
                replies = self.http_many(reqs, timeout_s=scrape_timeout)
        except DsOpsError as exc:  # the target itself unreachable: every component unseen
            why = f"target unreachable: {str(exc).splitlines()[0][:200]}"
            replies = [HttpReply(None, "", why, 0.0)] * len(reqs)
            if probes:  # nothing was sent: not a stall of the unit; probe again next round
                probes, self._next_probe = [], None
        names = list(self.endpoints.metrics)
        n = len(names)
        k = n if confirm else 2 * n  # where the router's reply is
        servers = {
            name: server_reading(
                name,
                replies[i],
                None if confirm else replies[n + i],
                url=self.endpoints.metrics[name],
            )
            for i, name in enumerate(names)
        }
        router = router_reading(
            replies[k], url=self.endpoints.router_metrics_url, router=self.endpoints.router_kind
        )
        scrape = Scrape(now, servers, router)
        outcomes = tuple(judge(p, r) for p, r in zip(probes, replies[k + 1 :], strict=False))
        self.rounds += 1
        silence = self.stream.silence_s() if self.stream is not None else None
        blind = self.stream.blind() if self.stream is not None else None
        findings = self.detector.observe(
            scrape, outcomes or None, silence_s=silence, stream_blind=blind
        )
        return Round(self.rounds, utc_now_iso(self.clock), scrape, outcomes, tuple(findings))

    def run(
        self,
        emit: Callable[[Round], None],
        *,
        stop: Callable[[], bool] = lambda: False,
        max_rounds: int | None = None,
    ) -> Round | None:
        """Rounds every `interval` until `stop()` or `max_rounds`; returns the last one. Between
        rounds the probe stream is looked at every POLL_S: its silence brings the next round
        forward, then one more CONFIRM_GAP_S later (the two scrapes that confirm a wedge)."""
        last = None
        while not stop() and (max_rounds is None or self.rounds < max_rounds):
            started = self.clock.monotonic()
            last = self.tick()
            emit(last)
            due = started + self.settings.wall(self.settings.interval_s)
            # at least one look at the stream after every round, however long the round took
            while not stop():
                if self._stream_silent() and (max_rounds is None or self.rounds < max_rounds):
                    last = self.tick(confirm=True)
                    emit(last)
                    if any(f.code == "decode_wedged" for f in last.findings):
                        break
                    self.clock.sleep(CONFIRM_GAP_S)
                    continue
                if self.clock.monotonic() >= due:
                    break
                self.clock.sleep(min(POLL_S, max(0.0, due - self.clock.monotonic())))
        return last

    def _stream_silent(self) -> bool:
        silence = self.stream.silence_s() if self.stream is not None else None
        return silence is not None and silence >= SILENCE_S

    def once(self, emit: Callable[[Round], None]) -> Round:
        """Watch for one wedge window (so a frozen counter can be told from a slow one) and one
        probe round, then return the last round: its worst finding is `--once`'s exit code."""
        self.settings = replace(self.settings, stalled_probes=1)
        self.detector = Detector(self.settings)
        deadline = self.clock.monotonic() + self.settings.wall(
            self.settings.wedge_window_s() + self.settings.interval_s
        )
        last = self.tick()
        rounds = [last]
        # Enough evidence: the window, then (bounded by a second window) until every component
        # answered and a probe came back, or a finding decided; short of that: "unknown".
        give_up = deadline + self.settings.wall(self.settings.wedge_window_s())
        while self.clock.monotonic() < deadline or (
            self.clock.monotonic() < give_up and not self._enough(rounds)
        ):
            emit(last)
            self.clock.sleep(self.settings.wall(self.settings.interval_s))
            last = self.tick()
            rounds.append(last)
        if not self._enough(rounds) and last.answered:
            last = replace(last, unproven="no probe through the router answered while watched")
        last = with_worst_seen(last, rounds[:-1])
        emit(last)
        return last

    def _enough(self, rounds: Sequence[Round]) -> bool:
        """A finding decided, or the last round answered everywhere and (probes on) some probe
        came back."""
        if rounds[-1].worst is not Severity.OK:
            return True
        probed = not self.probe or any(p.status != "stalled" for r in rounds for p in r.probes)
        return rounds[-1].answered and probed


def with_worst_seen(last: Round, earlier: Sequence[Round]) -> Round:
    """`--once`'s one rule: its word (and exit code) is the worst finding of ANY round it
    watched, not only the last one's (issue 40: five CRITICAL rounds, then a WARNING, exited 4).
    A finding of an earlier round worse than the last round's worst is carried into the last,
    saying where it was seen, so the printed round explains the exit code."""
    have = {(f.code, f.component) for f in last.findings}
    carried: dict[tuple[str, str], Finding] = {}
    for r in earlier:
        for f in r.findings:
            key = (f.code, f.component)
            if f.severity > last.worst and key not in have and key not in carried:
                where = f"seen in round {r.number} of this watch ({r.at}), not in its last"
                carried[key] = replace(f, evidence=(*f.evidence, where))
    if not carried:
        return last
    return replace(last, findings=(*last.findings, *carried.values()))
