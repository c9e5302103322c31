"""What `dsv4ops watch` reports: findings with their evidence and the runbook to follow.

A finding is an observation, never an action: watch restarts nothing. Severities order the
exit code of `--once` (0 ok, 1 warning, 2 critical) and the `dsv4ops_watch_finding` gauge.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict


class Severity(enum.IntEnum):
    OK = 0
    WARNING = 1
    CRITICAL = 2


# finding code -> (severity, runbook name under runbooks/)
KINDS: dict[str, tuple[Severity, str]] = {
    "decode_wedged": (Severity.CRITICAL, "decode-wedge"),
    "probe_stalled": (Severity.CRITICAL, "decode-wedge"),
    # the probe stream keeps failing before a token: the 3 s wedge detector cannot see, so the
    # unit cannot be called OK (issue 38: refused 26 times in 30 s while watch said OK)
    "probe_stream_blind": (Severity.WARNING, "decode-wedge"),
    "pd_transfer_degraded": (Severity.WARNING, "bootstrap-degradation"),
    "probe_failed_while_healthy": (Severity.WARNING, "bootstrap-degradation"),
    # HTTP 401/403 to the probes: a key mismatch on this side, not a PD incident (it was sent to
    # bootstrap-degradation); the unit is unjudged end to end, so not OK
    "probe_unauthorized": (Severity.WARNING, "router-change"),
    "queue_stuck": (Severity.WARNING, "bootstrap-degradation"),
    # the decode's transfer queue never empties: requests held with no token, no notice coming
    # (NIXL, sglang#36033) until the decode's waiting timeout fails them
    "kv_transfer_stuck": (Severity.WARNING, "bootstrap-degradation"),
    "eager_fallback": (Severity.WARNING, "bucket-tuning"),
    "throughput_below_baseline": (Severity.WARNING, "bucket-tuning"),
    "tool_call_corruption": (Severity.CRITICAL, "tool-call-corruption"),
    "component_down": (Severity.CRITICAL, "pd-safe-restart"),
    # accepts connections, never answers in time: not shown down (busy? wedged? a proxy?), so
    # it cannot be OK either; look (issue 20: positive evidence only)
    "component_unresponsive": (Severity.WARNING, "pd-safe-restart"),
    "worker_unhealthy": (Severity.CRITICAL, "pd-safe-restart"),
    # answered with more /metrics than watch reads (issue 40): there, but unseen, so not OK
    "metrics_oversized": (Severity.WARNING, "pd-safe-restart"),
}


class Basis(enum.Enum):
    """The kinds of evidence a finding rests on, said with every wedge or down finding."""

    PROGRESS_COUNTER = "decode progress counter"  # realtime_tokens_total{mode=decode}
    RUNNING_GAUGE = "running gauge"  # num_running_reqs (last-published)
    PROBE_STREAM = "probe stream"  # the 1-token-at-a-time stream through the router
    PROBE_ROUNDS = "probe rounds"  # the probe generations through the router
    METRICS_SCRAPES = "/metrics scrapes"  # refused, broken or timed out
    ROUTER_HEALTH = "router worker health"  # smg_worker_health: the router's own /health checks
    KV_TRANSFER = "KV transfer gauges"  # the decode's transfer queue and its pending requests


# Wedge and down findings never rest on /health alone: long chunked prefills fail /health
# without a wedge (sglang#22511) and a wedged decode still answers it. Each names its basis,
# which must hold something other than the router's health verdict.
WEDGE_OR_DOWN = frozenset(
    {"decode_wedged", "probe_stalled", "component_down", "component_unresponsive"}
)


class FindingRecord(TypedDict):
    """A finding as watch's JSON lines print it (Finding.to_json)."""

    code: str
    severity: str
    component: str
    summary: str
    evidence: list[str]
    basis: list[str]
    runbook: str


@dataclass(frozen=True)
class Finding:
    code: str  # a key of KINDS
    component: str  # prefill | decode | router | unit
    summary: str
    evidence: tuple[str, ...]  # what was observed, with numbers and how long
    basis: tuple[Basis, ...] = ()  # the kinds of evidence it rests on

    def __post_init__(self) -> None:
        if self.code in WEDGE_OR_DOWN and not set(self.basis) - {Basis.ROUTER_HEALTH}:
            raise ValueError(f"{self.code} needs evidence beyond /health, got {self.basis}")

    @property
    def severity(self) -> Severity:
        return KINDS[self.code][0]

    @property
    def runbook(self) -> str:
        return KINDS[self.code][1]

    def to_json(self) -> FindingRecord:
        return {
            "code": self.code,
            "severity": self.severity.name.lower(),
            "component": self.component,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "basis": [b.value for b in self.basis],
            "runbook": f"runbooks/{self.runbook}.md",
        }

    def line(self) -> str:
        judged = f" (judged by: {', '.join(b.value for b in self.basis)})" if self.basis else ""
        return (
            f"{self.severity.name} {self.code} ({self.component}): {self.summary} "
            f"[{'; '.join(self.evidence)}]{judged} -> runbooks/{self.runbook}.md"
        )


def worst(findings: Iterable[Finding]) -> Severity:
    return max((f.severity for f in findings), default=Severity.OK)
