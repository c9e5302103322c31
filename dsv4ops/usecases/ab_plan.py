"""`dsv4ops ab` up front: the counterbalanced schedule, the correctness gates B's change calls
for, the switch cost per arm, the measured part per block, the sequential design's budget and
the expected and worst-case time for the effect the operator names. What `--dry-run` prints is
what `run_ab` runs; planning touches nothing.

The budget (the most blocks the experiment may take) is sized by the design
(ab.sequential.size_budget): the fewest pairs with which a true effect of `--effect` percent is
decided with 90% probability at the stated deploy-to-deploy `--variation`, at each measured
level judged at its Bonferroni share of the alpha (as ab.analysis judges it); `--blocks`
overrides it. The experiment stops earlier as soon as the verdict is decided.

The switch cost (stop, restart, weights, CUDA-graph capture, probe) per arm is ab_switch.py's:
the last SUCCEEDED deploy of the same profile on this target as the journal timed it, else an
estimate from the profile's decode bucket count.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.recorded import RecordedFlags
from dsv4ops.usecases.ab_json import ABPlanJSON
from dsv4ops.usecases.ab_switch import Switch, switch_cost
from dsv4ops.usecases.deploy import DeployPlan, plan_deploy
from dsv4ops.usecases.gate import thresholds_of
from dsv4ops.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.ab.model import Arm
    from dsv4ops.canary import Thresholds

SUITES = ("sweep", "soak")
DEFAULT_EFFECT = 0.05  # the smallest throughput effect worth a switch, and the equivalence band
DEFAULT_WARMUP_S = 10.0
# Gate suites' length when they do not have one of their own (abort-cascade runs to its wedge
# check and recovery window).
ABORT_CASCADE_S = 30.0
# Seconds per suite of the winner's final gated deploy: deploy's default, or less with short
# blocks (final_gate_suite_s; usecases/ab.py runs it, the plan estimates it).
FINAL_GATE_S = 20.0
# Names the A/B gates carry (ab.decision.GateResult.suite) for the canary's suite names.
GATE_NAMES = {"abort-cascade": "abort_cascade", "corruption": "corruption", "sweep": "sweep"}


@dataclass(frozen=True)
class ABPlan:
    a: DeployPlan
    b: DeployPlan
    schedule: list[Arm]
    suite: str  # the measured workload: sweep | soak
    levels: tuple[int, ...]  # concurrency levels (sweep staircase; soak: one level)
    thresholds: Thresholds  # A's canary section, with the levels: one workload for both arms
    gates: list[str]  # canary suites B must pass (from the A -> B flag diff)
    gate_why: list[str]
    switch: dict[str, Switch]
    measured_s: float  # per block, after warm-up
    warmup_s: float
    gate_s: float
    confidence: float = 0.95
    report_dir: str | None = None
    notes: list[str] = field(default_factory=list)
    effect: float = DEFAULT_EFFECT  # the named effect (fraction); also the equivalence band
    variation: float = 0.02  # the stated deploy-to-deploy sd per block (fraction)

    @property
    def looks(self) -> int:
        """The budget in A/B pairs: the design looks after each."""
        return len(self.schedule) // 2

    def _block_s(self, arm: Arm) -> float:
        return self.switch[arm].seconds + self.warmup_s + self.measured_s

    @property
    def final_s(self) -> float:
        """The winner's final gated deploy, estimated as the plan estimates a deploy and its
        gate: the dearer arm's switch, then the deploy's canary gate (smoke and the suites the
        A/B flag change calls for) at the final gate's time per suite (the abort cascade at its
        own length: it runs to its wedge check and recovery window)."""
        per_suite = final_gate_suite_s(self.measured_s)
        gate = sum(
            ABORT_CASCADE_S if s == "abort-cascade" else per_suite for s in ("smoke", *self.gates)
        )
        return max(s.seconds for s in self.switch.values()) + gate

    def expected(self) -> tuple[float, float, float]:
        """(expected blocks, their seconds, P(decided within the budget)) for a true effect of
        the named size at the stated variation."""
        from dsv4ops.ab.sequential import expected_pairs

        pairs, p = expected_pairs(
            self.looks, 1 - self.confidence, self.effect, self.variation, levels=len(self.levels)
        )
        per_pair = sum(self._block_s(arm) for arm in self.schedule) / self.looks
        return 2 * pairs, pairs * per_pair + self.gate_s + self.final_s, p

    @property
    def target_name(self) -> str:
        return self.a.target.name

    def deployment(self, arm: Arm) -> Deployment:
        return (self.a if arm == "A" else self.b).deployment

    def profile(self, arm: Arm) -> str:
        return str(self.deployment(arm).profile_name)

    @property
    def total_s(self) -> float:
        """The worst case: the whole budget, the gates on B and the winner's final gated
        deploy (final_s)."""
        blocks = sum(self._block_s(arm) for arm in self.schedule)
        return blocks + self.gate_s + self.final_s

    def to_json(self) -> ABPlanJSON:
        exp_blocks, exp_s, p = self.expected()
        return {
            "dry_run": True,
            "target": self.target_name,
            "a": self.profile("A"),
            "b": self.profile("B"),
            "schedule": "".join(self.schedule),
            "blocks": len(self.schedule),
            "suite": self.suite,
            "levels": list(self.levels),
            "gates": [GATE_NAMES.get(g, g) for g in self.gates],
            "gate_why": self.gate_why,
            "switch_s": {
                arm: {"seconds": round(s.seconds, 1), "source": s.source}
                for arm, s in self.switch.items()
            },
            "warmup_s": self.warmup_s,
            "measured_s_per_block": round(self.measured_s, 1),
            "gate_s": round(self.gate_s, 1),
            "final_deploy_s": round(self.final_s, 1),
            "estimated_total_s": round(self.total_s, 1),
            "worst_case_total_s": round(self.total_s, 1),
            "confidence": self.confidence,
            "design": "group-sequential (Kim-DeMets alpha t^3), a look after every pair",
            "effect_pct": round(100 * self.effect, 3),
            "variation_pct": round(100 * self.variation, 3),
            "band_pct": round(100 * self.effect, 3),
            "budget_pairs": self.looks,
            "expected_blocks": round(exp_blocks, 2),
            "expected_total_s": round(exp_s, 1),
            "p_decided": round(p, 4),
            "notes": self.notes,
        }

    def detail(self) -> str:
        """The plan in one line, as the experiment journals its `plan` step."""
        gates = ",".join(self.gates) or "none"
        return (
            f"schedule {''.join(self.schedule)}; suite {self.suite} at "
            f"{','.join(map(str, self.levels))}; gates on B: {gates}; {self.measured_s:g} s "
            f"measured per block after {self.warmup_s:g} s warm-up; sequential, a budget of "
            f"{self.looks} pairs for a {100 * self.effect:g}% effect at ±{100 * self.variation:g}% "
            f"variation, {self.confidence:g} confidence"
        )

    def lines(self) -> list[str]:
        sched = " ".join("".join(self.schedule[i : i + 4]) for i in range(0, len(self.schedule), 4))
        out = [
            f"plan: A/B of A={self.a.deployment.describe()} and B={self.b.deployment.describe()} "
            f"on {self.target_name}",
            f"  schedule: {sched} (a budget of {len(self.schedule)} blocks; each deploys its "
            "arm as the whole PD unit, proven by a generation)",
            f"  design: group-sequential, a look after every A/B pair; stops as soon as B is "
            f"shown better or worse, or equivalent within ±{100 * self.effect:g}%, at "
            f"{self.confidence:g} confidence over all looks",
            f"  workload: canary {self.suite} at concurrency {', '.join(map(str, self.levels))}; "
            f"warm-up {self.warmup_s:g} s, then {self.measured_s:.0f} s measured per block",
        ]
        out += [
            f"  gate on B: {GATE_NAMES.get(g, g)} ({why})"
            for g, why in zip(self.gates, self.gate_why, strict=True)
        ]
        if not self.gates:
            out.append("  gate on B: none (the flag change calls for no correctness suite)")
        out += [f"  switch {arm}: {s.seconds:.0f} s ({s.source})" for arm, s in self.switch.items()]
        exp_blocks, exp_s, p = self.expected()
        out.append(
            f"  expected for a true {100 * self.effect:+g}% at ±{100 * self.variation:g}% "
            f"deploy-to-deploy variation: {exp_blocks:.1f} blocks, {_duration(exp_s)} "
            f"(decided within the budget with probability {p:.2f})"
        )
        out.append(
            f"  estimated total: {_duration(self.total_s)} at worst (the whole budget, the "
            f"gates on B and the winner's final deploy with its canary gate, "
            f"{_duration(self.final_s)})"
        )
        out += [f"  note: {n}" for n in self.notes]
        return out


def _check_report_dir(directory: Path) -> None:
    """The report is written when the experiment ends, hours later: a --report this process
    cannot write is refused before anything is deployed (checked without creating it, so a dry
    run changes nothing). Raises DsOpsError."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    why = None
    if not existing.is_dir():
        why = f"{existing} is not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        why = f"{existing} is not writable by this user"
    if why is not None:
        raise DsOpsError(
            f"--report {directory}: {why}, and the report is written only when the experiment "
            "ends; nothing was deployed",
            hint="give --report a directory you can write (it is made if missing), or leave it "
            "out for the state directory's ab/EXPERIMENT_ID",
        )


def plan_ab(
    session: TargetSession,
    a_ref: str,
    b_ref: str,
    *,
    suite: str = "sweep",
    blocks: int | None = None,
    effect: float = DEFAULT_EFFECT,
    variation: float = 0.02,
    levels: Sequence[int] = (),
    block_s: float | None = None,
    warmup_s: float = DEFAULT_WARMUP_S,
    confidence: float = 0.95,
    report_dir: str | None = None,
    workload: Mapping[str, object] | None = None,
) -> ABPlan:
    """Render both profiles for the session's target and plan the experiment; the switch costs
    come from the session's journal (the target's record, which deploy writes). Raises
    DsOpsError. `workload`: canary Thresholds fields to override for the measured workload
    (e.g. shorter sweep requests in tests)."""
    from dsv4ops.ab.schedule import counterbalanced
    from dsv4ops.ab.sequential import size_budget

    _check_design(suite, confidence=confidence, effect=effect, variation=variation)
    if report_dir is not None:
        _check_report_dir(Path(report_dir))
    target_name = session.target.name
    a, b = (
        plan_deploy(a_ref, target_name, canary=False),
        plan_deploy(b_ref, target_name, canary=False),
    )
    if a.deployment.commands_hash == b.deployment.commands_hash:
        raise DsOpsError(
            f"{a_ref} and {b_ref} render the same commands on {a.target.name}: "
            "there is nothing to compare"
        )
    th = thresholds_of(a.deployment)
    levels = tuple(sorted(set(levels))) or (
        tuple(sorted(set(th.sweep_concurrency))) if suite == "sweep" else (th.soak_concurrency,)
    )
    if any(c < 1 for c in levels) or (suite == "soak" and len(levels) != 1):
        raise DsOpsError(
            f"--levels {','.join(map(str, levels))}: the sweep takes levels >= 1, "
            "the soak exactly one"
        )
    th = th.with_overrides(**dict(workload or {})).model_copy(update={"sweep_concurrency": levels})
    # the primary's alpha is split over its levels (ab.analysis): the budget is sized at that
    sized = 2 * size_budget(effect, variation, 1 - confidence, levels=len(levels))
    try:
        schedule = counterbalanced(sized if blocks is None else blocks)
    except ValueError as exc:
        raise DsOpsError(f"--blocks {blocks}: {exc}") from None
    measured = block_s or (
        len(levels) * th.sweep_level_s if suite == "sweep" else th.stress_duration_s
    )
    gates, why = gate_suites(a, b)
    switch = {"A": switch_cost(session.journal, a), "B": switch_cost(session.journal, b)}
    notes = _design_notes(blocks, sized, effect=effect, variation=variation)
    gate_s = sum(_gate_seconds(g, suite, th) for g in gates)
    return ABPlan(
        a,
        b,
        schedule,
        suite,
        levels,
        th,
        gates,
        why,
        switch,
        measured,
        warmup_s,
        gate_s,
        confidence,
        report_dir,
        notes,
        effect,
        variation,
    )


def _check_design(suite: str, *, confidence: float, effect: float, variation: float) -> None:
    """The experiment's design options in range; DsOpsError naming the option otherwise."""
    if suite not in SUITES:
        raise DsOpsError(f"--suite {suite!r}: choose from {', '.join(SUITES)}")
    if not 0.5 <= confidence < 1:
        raise DsOpsError(f"--confidence {confidence:g}: expected a value in [0.5, 1)")
    if not 0 < effect < 1:
        raise DsOpsError(f"--effect {100 * effect:g}: expected a percentage above 0 and below 100")
    if not 0 <= variation < 0.5:
        raise DsOpsError(f"--variation {100 * variation:g}: expected a percentage in [0, 50)")


def _design_notes(blocks: int | None, sized: int, *, effect: float, variation: float) -> list[str]:
    """What the plan warns about its power: a budget below the sized one, or an effect too small
    for the variation to be decided within the most looks."""
    from dsv4ops.ab.sequential import MAX_LOOKS

    notes: list[str] = []
    if blocks is not None and blocks < sized:
        notes.append(
            f"a budget of {blocks} blocks is below the {sized} the design sizes for a "
            f"{100 * effect:g}% effect at ±{100 * variation:g}% variation: such an "
            "effect is more often left undecided (inconclusive keeps A)"
        )
    if sized >= 2 * MAX_LOOKS:
        notes.append(
            f"a {100 * effect:g}% effect is small for ±{100 * variation:g}% deploy-to-deploy "
            f"variation: even {2 * MAX_LOOKS} blocks decide it with less than 90% probability"
        )
    return notes


def gate_suites(a: DeployPlan, b: DeployPlan) -> tuple[list[str], list[str]]:
    """The canary suites B's change calls for (the deploy's rule, canary.suites_for_change,
    without its smoke: every block's deploy already proves a generation), each with why: the
    changes that call for it, the on/off flags' in their own declared words."""
    from dsv4ops.canary import suites_for_change
    from dsv4ops.profiles.profile_spec import SWITCHES

    old, new = a.deployment, b.deployment
    suites = [s for s in suites_for_change(old, new) if s != "smoke"]
    causes: dict[str, list[str]] = {}
    for flag, switch in SWITCHES:
        turned = new.switches.get(flag)
        if switch.suite is not None and old.switches.get(flag) != turned:
            words = switch.on_words if turned else switch.off_words
            causes.setdefault(switch.suite, []).append(f"flags.{flag} changed ({words})")
    if old.kernel_package != new.kernel_package:
        causes.setdefault("corruption", []).append("the decode kernels changed")
    sweep_why = _sweep_why(old.flags, new.flags)
    if sweep_why:
        causes.setdefault("sweep", []).insert(0, sweep_why)
    return suites, ["; ".join(causes.get(s) or ["the change calls for it"]) for s in suites]


def _sweep_why(old: RecordedFlags, new: RecordedFlags) -> str:
    """Why the sweep gates B: its buckets, its decode context length (the DSV4 decode graph
    width follows it, sglang#40442), or both."""
    parts = []
    if old.decode_buckets != new.decode_buckets:
        parts.append("the decode CUDA-graph buckets changed: the sawtooth and eager fallbacks")
    ctx_a, ctx_b = old.decode_context_length, new.decode_context_length
    if ctx_a != ctx_b:
        parts.append(
            f"the decode's --context-length changed ({ctx_a or 'model default'} -> "
            f"{ctx_b or 'model default'}): the DSV4 decode graph width follows it (sglang#40442)"
        )
    return "; ".join(parts)


def final_gate_suite_s(measured_s: float) -> float:
    """Seconds per suite of the winner's final gate: FINAL_GATE_S, or the block's measured time
    when shorter (at least 2 s)."""
    return min(FINAL_GATE_S, max(2.0, measured_s))


def _gate_seconds(suite: str, measured_suite: str, th: Thresholds) -> float:
    if suite == "sweep" and measured_suite == "sweep":
        return 0.0  # B's measured sweeps are the gate
    if suite == "abort-cascade":
        return ABORT_CASCADE_S
    return th.stress_duration_s


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
