"""What `dsv4ops ab --json` prints: the plan (`--dry-run`, ABPlan.to_json) and how the
experiment ended (ABOutcome.to_json), typed once (issue 42 item 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from dsv4ops.ab.decision import Rule
    from dsv4ops.ab.model import Arm, BlockRecord


class SwitchJSON(TypedDict):
    """One arm's switch cost and where it came from (usecases/ab_switch.py)."""

    seconds: float
    source: str


class ABPlanJSON(TypedDict):
    """The plan: schedule, workload, gates, time per part, the sequential design's budget."""

    dry_run: bool
    target: str
    a: str
    b: str
    schedule: str  # "ABBA..."
    blocks: int
    suite: str
    levels: list[int]
    gates: list[str]
    gate_why: list[str]
    switch_s: dict[str, SwitchJSON]
    warmup_s: float
    measured_s_per_block: float
    gate_s: float
    final_deploy_s: float
    estimated_total_s: float
    worst_case_total_s: float
    confidence: float
    design: str
    effect_pct: float
    variation_pct: float
    band_pct: float
    budget_pairs: int
    expected_blocks: float
    expected_total_s: float
    p_decided: float
    notes: list[str]


class ABOutcomeJSON(TypedDict):
    """How the experiment ended: the winner and why, where the box is, every block and gate."""

    experiment: str
    target: str
    a: str
    b: str
    schedule: str
    winner: Arm
    decided_by: Rule
    reasons: list[str]
    box: str
    ok: bool
    interrupted: str | None
    failure: str | None
    partial: bool
    blocks: list[BlockRecord]
    gates: list[dict[str, object]]  # each gate's record (ab.decision.GateResult)
    analysis: dict[str, object]  # ab.analysis.Analysis's record
    report: list[str]
