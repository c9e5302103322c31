"""What `dsv4ops watch` reports: findings with their evidence and the runbook to follow.

A finding is an observation, never an action: watch restarts nothing. Severities order the
exit code of `--once` (0 ok, 1 warning, 2 critical) and the `dsv4ops_watch_finding` gauge.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from dsv4ops.jsontypes import JSONObject


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
    "queue_stuck": (Severity.WARNING, "bootstrap-degradation"),
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


@dataclass(frozen=True)
class Finding:
    code: str  # a key of KINDS
    component: str  # prefill | decode | router | unit
    summary: str
    evidence: tuple[str, ...]  # what was observed, with numbers and how long

    @property
    def severity(self) -> Severity:
        return KINDS[self.code][0]

    @property
    def runbook(self) -> str:
        return KINDS[self.code][1]

    def to_json(self) -> JSONObject:
        return {
            "code": self.code,
            "severity": self.severity.name.lower(),
            "component": self.component,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "runbook": f"runbooks/{self.runbook}.md",
        }

    def line(self) -> str:
        return (
            f"{self.severity.name} {self.code} ({self.component}): {self.summary} "
            f"[{'; '.join(self.evidence)}] -> runbooks/{self.runbook}.md"
        )


def worst(findings: Iterable[Finding]) -> Severity:
    return max((f.severity for f in findings), default=Severity.OK)
