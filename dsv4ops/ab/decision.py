"""Which arm the box is left on: correctness gates first, then positive evidence for B only.

Order of the rules (the first that applies decides):
1. B failed a correctness gate (the suite its change calls for): A, whatever B's throughput.
2. The experiment is partial (interrupted, blocks missing): A.
3. The primary metric is worse at some concurrency, or a guard metric (TTFT, ITL) is worse with
   its whole repeated interval beyond the guard band, its alpha split over all guard checks (the
   fitted step law's a and b excepted: DIAGNOSTIC_METRICS): A.
4. The primary metric is better at one concurrency at least: B.
5. Otherwise (equivalent, inconclusive, nothing measured): A; "no difference found" keeps A.

`settled` says whether the rules can no longer change with more pairs: the sequential design
stops there (a failed gate, a worse primary or guard, a better primary, or every level of the
primary equivalent), else it goes on to the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dsv4ops.ab.analysis import Analysis, MetricVerdict
from dsv4ops.ab.model import DIAGNOSTIC_METRICS, Arm, higher_is_better
from dsv4ops.journal.gates import GateVerdict


@dataclass(frozen=True)
class GateResult:
    suite: str  # "abort_cascade" | "corruption" | "sweep" ...
    arm: Arm
    passed: bool
    reason: str  # the suite's own summary (why it failed)
    verdict: GateVerdict | None = None  # None: PASS when passed, else FAIL

    @property
    def judged(self) -> GateVerdict:
        """The verdict as the journal records it (a gate that could not judge is INCONCLUSIVE,
        and not passed: B passes only on positive evidence)."""
        if self.verdict is not None:
            return self.verdict
        return GateVerdict.PASS if self.passed else GateVerdict.FAIL

    def to_record(self) -> dict[str, object]:
        return {
            "suite": self.suite,
            "arm": self.arm,
            "passed": self.passed,
            "verdict": self.judged.value,
            "reason": self.reason,
        }


# Which rule of the module docstring decided, for scripts (`ab --json` "decided_by"): the
# sentences in `reasons` are for people and may be reworded; these names are not.
Rule = Literal[
    "b_failed_gate",  # 1
    "stopped_early",  # interrupted or failed before a decision: A is put back
    "partial",  # 2
    "b_worse",  # 3, the primary metric
    "guard_worse",  # 3, a guard metric beyond its band
    "b_better",  # 4
    "nothing_measured",  # 5
    "equivalent",  # 5
    "inconclusive",  # 5
]


@dataclass(frozen=True)
class Decision:
    winner: Arm
    rule: Rule
    reasons: list[str]  # human sentences, the first one is the headline

    def to_record(self) -> dict[str, object]:
        return {"winner": self.winner, "decided_by": self.rule, "reasons": list(self.reasons)}


def _level(v: MetricVerdict) -> str:
    return "the step-law fit" if v.concurrency == 0 else f"concurrency {v.concurrency}"


def _effect(v: MetricVerdict) -> str:
    if v.ratio is None:
        return "n/a"
    ci = "" if v.ci_low is None or v.ci_high is None else f" (CI {v.ci_low:.3f}-{v.ci_high:.3f})"
    return f"B/A {v.ratio:.3f}{ci}"


def _beyond_band(v: MetricVerdict, band: float) -> bool:
    """A worse verdict whose whole repeated CI lies more than `band` in the bad direction: the
    mirror of "equivalent" (CI inside the band). A point estimate beyond it is not enough: a
    guard metric is checked at every level and look, and a noisy p99 whose CI reaches into the
    band does not show a cost larger than the band."""
    if v.verdict != "worse" or v.ci_low is None or v.ci_high is None:
        return False
    return v.ci_high < 1 - band if higher_is_better(v.metric) else v.ci_low > 1 + band


def decide(
    analysis: Analysis, gates: Sequence[GateResult], *, primary: str = "output_tok_s"
) -> Decision:
    failed_b = [g for g in gates if g.arm == "B" and not g.passed]
    failed_a = [g for g in gates if g.arm == "A" and not g.passed]
    side = [f"A also failed the {g.suite} gate: {g.reason}" for g in failed_a]
    if failed_b:
        heads = [
            f"B failed the {g.suite} gate, so A stays whatever B's throughput: {g.reason}"
            for g in failed_b
        ]
        return Decision("A", "b_failed_gate", heads + side + _evidence(analysis, primary))
    if analysis.partial:
        return Decision(
            "A",
            "partial",
            [
                "the experiment is partial, so the box stays on A: "
                + "; ".join(analysis.notes or ["blocks are missing"]),
                *side,
                *_evidence(analysis, primary),
            ],
        )
    prim = analysis.for_metric(primary)
    worse, harm = _against(analysis, primary)
    if worse or harm:
        v = (worse or harm)[0]
        return Decision(
            "A",
            "b_worse" if worse else "guard_worse",
            [
                f"B is worse on {v.metric} at {_level(v)} ({_effect(v)}), so A stays",
                *side,
                *_evidence(analysis, primary),
            ],
        )
    better = [v for v in prim if v.verdict == "better"]
    if better:
        best = max(better, key=lambda v: abs((v.ratio or 1) - 1))
        head = (
            f"B wins: {primary} better at {len(better)} of {len(prim)} concurrencies, "
            f"up to {100 * ((best.ratio or 1) - 1):+.1f}% at {_level(best)} ({_effect(best)})"
        )
        return Decision("B", "b_better", [head, *side, *_evidence(analysis, primary)])
    rule: Rule
    if not prim:
        rule = "nothing_measured"
        head = f"no {primary} was measured in a complete A/B pair, so the box stays on A"
    elif all(v.verdict == "equivalent" for v in prim):
        rule = "equivalent"
        head = (
            f"B is equivalent to A on {primary} within ±{100 * analysis.band:g}%; "
            "no gain shown, so the box stays on A"
        )
    else:
        rule = "inconclusive"
        head = f"no {primary} gain shown for B (inconclusive), so the box stays on A"
    return Decision("A", rule, [head, *side, *_evidence(analysis, primary)])


def _against(analysis: Analysis, primary: str) -> tuple[list[MetricVerdict], list[MetricVerdict]]:
    """(primary levels worse, guard checks worse beyond the guard band)."""
    worse = [v for v in analysis.for_metric(primary) if v.verdict == "worse"]
    harm = [
        v
        for v in analysis.verdicts
        if v.metric != primary
        and v.metric not in DIAGNOSTIC_METRICS
        and _beyond_band(v, analysis.guard_band)
    ]
    return worse, harm


def settled(
    analysis: Analysis, gates: Sequence[GateResult], *, primary: str = "output_tok_s"
) -> bool:
    """True when more pairs cannot change the decision's outcome (see the module docstring)."""
    if any(g.arm == "B" and not g.passed for g in gates):
        return True
    worse, harm = _against(analysis, primary)
    prim = analysis.for_metric(primary)
    return bool(
        worse
        or harm
        or any(v.verdict == "better" for v in prim)
        or (prim and all(v.verdict == "equivalent" for v in prim))
    )


def _evidence(analysis: Analysis, primary: str) -> list[str]:
    """One sentence per concurrency of the primary metric: its verdict and why."""
    return [
        f"{primary} at {_level(v)}: {v.verdict} ({v.note})" for v in analysis.for_metric(primary)
    ]
