"""How an A/B experiment ended (usecases/ab.py runs it): its blocks, gates, analysis, decision
and where the box is, and the JSON `dsv4ops ab --json` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dsv4ops import exitcodes
from dsv4ops.errors import DeployError
from dsv4ops.orchestrate.interrupts import DeployInterrupted
from dsv4ops.usecases.ab_json import ABOutcomeJSON
from dsv4ops.usecases.ab_plan import ABPlan

if TYPE_CHECKING:
    from dsv4ops.ab.analysis import Analysis
    from dsv4ops.ab.decision import Decision, GateResult
    from dsv4ops.ab.model import BlockResult


@dataclass
class ABOutcome:
    """How the experiment ended: its blocks, gates, analysis, decision and where the box is."""

    op_id: str
    plan: ABPlan
    blocks: list[BlockResult]
    gates: list[GateResult]
    analysis: Analysis
    decision: Decision
    box: str  # what runs now, in words
    report: list[Path] = field(default_factory=list)
    interrupted: str | None = None  # why the experiment stopped early (signal)
    failure: str | None = None  # why it stopped early (a deploy or a suite failed)

    @property
    def ok(self) -> bool:
        return self.interrupted is None and self.failure is None

    @property
    def exit_code(self) -> int:
        """What `raise_for` makes of it (dsv4ops/exitcodes.py): 0 whichever arm won."""
        if self.interrupted:
            return exitcodes.INTERRUPTED
        return exitcodes.FAILED if self.failure else exitcodes.OK

    def to_json(self) -> ABOutcomeJSON:
        return {
            "experiment": self.op_id,
            "target": self.plan.target_name,
            "a": self.plan.profile("A"),
            "b": self.plan.profile("B"),
            "schedule": "".join(self.plan.schedule),
            "winner": self.decision.winner,
            "decided_by": self.decision.rule,
            "reasons": self.decision.reasons,
            "box": self.box,
            "ok": self.ok,
            "interrupted": self.interrupted,
            "failure": self.failure,
            "partial": self.analysis.partial or not self.ok,
            "blocks": [b.to_record() for b in self.blocks],
            "gates": [g.to_record() for g in self.gates],
            "analysis": self.analysis.to_record(),
            "report": [str(p) for p in self.report],
        }


def raise_for(out: ABOutcome) -> None:
    """An interrupted experiment exits 130, a failed one 2, each naming what the box runs."""
    if out.interrupted:
        raise DeployInterrupted(f"{out.interrupted}; the box runs {out.box}")
    if out.failure:
        raise DeployError(f"{out.failure}; the box runs {out.box}")
