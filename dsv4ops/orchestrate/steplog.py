"""What the step runner (engine.py) did, in order: for messages, --json and the benchmark."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.outcome import StepRecord


@dataclass
class StepTiming:
    title: str
    action: str
    component: str | None
    duration_s: float
    ok: bool
    detail: str = ""


class ProcessRecord(TypedDict):
    """A component's process as the journal records it at success (drift compares them)."""

    pid: int | None
    started_at: str | None


@dataclass
class RunLog:
    """What the runner did, in order, for messages, --json and the benchmark."""

    timings: list[StepTiming] = field(default_factory=list)
    changed: bool = False  # something on the target was stopped or started
    ready_wait_s: dict[str, float] = field(default_factory=dict)  # start() return -> ready seen
    probe_checks: list[str] = field(default_factory=list)

    def done_titles(self) -> list[str]:
        return [t.title for t in self.timings if t.ok and t.action in P.MUTATING | {P.PROBE}]

    def as_json(self) -> list[StepRecord]:
        """The steps as an Outcome's `steps`."""
        return [
            {
                "title": t.title,
                "action": t.action,
                "component": t.component,
                "duration_s": t.duration_s,
                "ok": t.ok,
                "detail": t.detail,
            }
            for t in self.timings
        ]
