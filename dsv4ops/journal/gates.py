"""Gate results as data (issue 39 item 2): the `GateResult` every judging place records on the
step that ends its gate (key `gate`); an operation begun with `gates: GATES_RECORDED` is judged
by its GateResults alone, an older one by those `legacy_gate` reads off its gate steps (the one
reader of the old step names and words, through schema.migrate)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dsv4ops.jsontypes import JSONObject

GATES_RECORDED = 1  # the `begin` record's `gates`: this operation records its GateResults


class GateVerdict(str, enum.Enum):
    """A gate's verdict: the canary's Verdict (dsv4ops/canary/verdict.py), same values."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"

    @classmethod
    def of(cls, verdict: object) -> GateVerdict:
        """The one mapping from a suite's verdict (a canary Verdict or its value) to the
        journal's; raises ValueError for anything else."""
        return cls(str(getattr(verdict, "value", verdict)))


class GateSource(str, enum.Enum):
    """Which command's gate judged the deployment."""

    DEPLOY = "deploy"  # `dsv4ops deploy`'s flag-aware canary gate
    ROLLBACK = "rollback"  # a rollback that ran a gate of its own
    RECOVER = "recover"  # `rollback --recover` / `deploy --recover`
    RUNBOOK = "runbook"  # a deploy or rollback run as a step of `dsv4ops runbook run`
    AB_GATE = "ab-gate"  # an A/B experiment's correctness gate on B
    AB_BLOCK = "ab-block"  # an A/B experiment's measured block of B, judged as a gate


@dataclass(frozen=True)
class GateResult:
    """One gate's judgement of one deployment (its commands hash)."""

    suite: str
    verdict: GateVerdict
    source: GateSource
    op: str  # the operation whose deployment was judged (an A/B: B's block deploy)
    commands_hash: str | None = None  # the commands judged (None: only in a migrated A/B gate)
    reasons: tuple[str, ...] = ()
    accepted: bool = False  # an INCONCLUSIVE accepted as asked (--accept-inconclusive-canary)
    duration_s: float | None = None

    @property
    def passed(self) -> bool:
        """Positive evidence: a PASS, or an INCONCLUSIVE the operator accepted."""
        return self.verdict is GateVerdict.PASS or (
            self.verdict is GateVerdict.INCONCLUSIVE and self.accepted
        )

    @property
    def failed(self) -> bool:
        """The commands failed this gate (never offered as known-good again): a FAIL anywhere;
        an A/B correctness gate that could not judge B too (B passes only on positive evidence,
        dsv4ops/ab/decision.py rule 1). A measured block INCONCLUSIVE, or a deploy's
        INCONCLUSIVE not accepted (its deploy was rolled back), is no failure of the commands."""
        if self.verdict is GateVerdict.FAIL:
            return True
        return self.source is GateSource.AB_GATE and not self.passed

    @property
    def label(self) -> str:
        """What `dsv4ops journal` prints of it: suite, verdict (the enum's word), "accepted"
        for an INCONCLUSIVE accepted as asked, the commands hash judged (short)."""
        accepted = " accepted" if self.accepted else ""
        return f"{self.suite} {self.verdict.value}{accepted} {(self.commands_hash or '-')[:8]}"

    def to_record(self) -> JSONObject:
        out: JSONObject = {
            "suite": self.suite,
            "verdict": self.verdict.value,
            "source": self.source.value,
            "op": self.op,
            "commands_hash": self.commands_hash,
            "reasons": list(self.reasons),
        }
        if self.accepted:
            out["accepted"] = True
        if self.duration_s is not None:
            out["duration_s"] = round(self.duration_s, 3)
        return out


class Step(Protocol):
    """What the migration reads of a journal step (schema.StepRecord)."""

    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def duration_s(self) -> float | None: ...
    @property
    def detail(self) -> str | None: ...


# -- the journals written before GateResults ------------------------------------------------------
# What the deploy's canary step recorded: its step name started with LEGACY_CANARY, its detail
# with the verdict. An A/B experiment's gates on B were its steps named "gate …".
LEGACY_CANARY = "canary"
LEGACY_PASS = "PASS"
LEGACY_ACCEPTED = "INCONCLUSIVE, accepted as asked"
LEGACY_FAIL = "verdict FAIL"
LEGACY_AB_GATE = "gate "
LEGACY_AB_MEASURED = " on B (measured)"
LEGACY_AB_UNJUDGED = "could not judge B"


def legacy_gate(s: Step, op: str, kind: str, commands_hash: str | None) -> GateResult | None:
    """An older version's gate step `s` of operation `op` (its kind's value, its begin's
    commands hash) as the GateResult that version judged it by; None: it ran no gate. Only
    schema.migrate calls it. An experiment's gate names no commands: its B blocks ran them."""
    if kind in ("deploy", "rollback"):  # records.Kind's values
        source = GateSource.ROLLBACK if kind == "rollback" else GateSource.DEPLOY
        return _legacy_canary(s, op, commands_hash, source)
    if kind == "experiment" and _is_legacy_ab_fail(s):
        return _legacy_ab(s, op)
    return None


def _legacy_canary(s: Step, op: str, h: str | None, source: GateSource) -> GateResult | None:
    if not s.name.startswith(LEGACY_CANARY):
        return None
    detail = s.detail or ""
    suite = s.name.split(":", 1)[0]
    if s.phase == "done" and detail.startswith(LEGACY_ACCEPTED):
        verdict, accepted = GateVerdict.INCONCLUSIVE, True
    elif s.phase == "done" and detail.startswith(LEGACY_PASS):
        verdict, accepted = GateVerdict.PASS, False
    elif s.phase == "failed" and detail.startswith(LEGACY_FAIL):
        verdict, accepted = GateVerdict.FAIL, False
    else:
        return None  # a canary skipped, or one that could not run: no gate judged it
    return GateResult(suite, verdict, source, op, h, (detail,), accepted, s.duration_s)


def _is_legacy_ab_fail(s: Step) -> bool:
    return s.name.startswith(LEGACY_AB_GATE) and s.phase == "failed"


def _legacy_ab(s: Step, experiment: str) -> GateResult:
    measured = s.name.endswith(LEGACY_AB_MEASURED)
    suite = s.name[len(LEGACY_AB_GATE) :].split(" on B", 1)[0]
    unjudged = not measured and LEGACY_AB_UNJUDGED in (s.detail or "")  # failed all the same
    return GateResult(
        suite,
        GateVerdict.INCONCLUSIVE if unjudged else GateVerdict.FAIL,
        GateSource.AB_BLOCK if measured else GateSource.AB_GATE,
        experiment,
        None,
        (s.detail,) if s.detail else (),
        False,
        s.duration_s,
    )


def canary_suites(reasons: Sequence[str]) -> str:
    """The suites a deploy's canary gate ran, from its reasons ("smoke: PASS", ...): "smoke",
    "smoke+abort_cascade"; "canary" when they name none."""
    verdicts = {v.value for v in GateVerdict}
    names = [r.split(": ", 1)[0] for r in reasons if r.split(": ", 1)[-1] in verdicts]
    return "+".join(dict.fromkeys(names)) or "canary"


def canary_gate(
    verdict: GateVerdict,
    reasons: Sequence[str],
    accept_inconclusive: bool,
    source: GateSource,
    op: str,
    commands_hash: str | None,
) -> GateResult:
    """A deploy's (or rollback's) canary gate: `verdict` of its suites; an INCONCLUSIVE is
    accepted when the operator asked (--accept-inconclusive-canary)."""
    v = GateVerdict.of(verdict)
    ok = accept_inconclusive and v is GateVerdict.INCONCLUSIVE
    return GateResult(canary_suites(reasons), v, source, op, commands_hash, tuple(reasons), ok)


def canary_detail(g: GateResult) -> str:
    """A passed canary gate's step detail: for people, in the words older versions judge by."""
    said = "; ".join(g.reasons)[:300]
    if g.accepted:
        return f"{LEGACY_ACCEPTED}: {said}"
    return f"{LEGACY_PASS} ({said})" if said else LEGACY_PASS
