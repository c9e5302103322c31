"""What the step runner (engine.py) did, in order: for messages, --json and the benchmark."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dsv4ops.jsontypes import JSONObject
from dsv4ops.orchestrate import plan as P


@dataclass
class StepTiming:
    title: str
    action: str
    component: str | None
    duration_s: float
    ok: bool
    detail: str = ""


@dataclass
class RunLog:
    """What the runner did, in order, for messages, --json and the benchmark."""

    timings: list[StepTiming] = field(default_factory=list)
    changed: bool = False  # something on the target was stopped or started
    ready_wait_s: dict[str, float] = field(default_factory=dict)  # start() return -> ready seen
    probe_checks: list[str] = field(default_factory=list)

    def done_titles(self) -> list[str]:
        return [t.title for t in self.timings if t.ok and t.action in P.MUTATING | {P.PROBE}]

    def as_json(self) -> list[JSONObject]:
        """The steps as an Outcome's `steps`."""
        return [asdict(t) for t in self.timings]
