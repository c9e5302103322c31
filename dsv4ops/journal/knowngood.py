"""The known-good rule's pieces the index keeps per row and asks when read (view.py's
`View.judge`), from GateResults and the serving mark, never a step's words. docs/deploy.md,
"What known-good means"."""

from __future__ import annotations

from dsv4ops.journal.gates import GateResult, GateSource
from dsv4ops.journal.records import ACCEPTED, NOT, PASSED, Judgement, Kind, Operation, Status


def commands_hash(op: Operation) -> str | None:
    value = (op.profile or {}).get("commands_hash")
    return str(value) if value else None


def own_failure(o: Operation, g: GateResult) -> tuple[str | None, str]:
    """(the commands, which gate) of a failed gate `o` recorded, from its own records: None
    commands for a gate that names none (a migrated A/B gate: legacy_ab_failure names each B
    block's; a deploy's or rollback's: no commands failed)."""
    if o.kind is not Kind.EXPERIMENT:
        return g.commands_hash, f"the canary gate of {o.op} ({o.profile_name or '-'})"
    if g.commands_hash:
        return g.commands_hash, f"the {_ab_gate(g)} of experiment {o.op} (B: {g.op})"
    return None, _ab_gate(g)


def legacy_ab_failure(gate: str, experiment: str, profile: object) -> str:
    """Which gate failed a B block's commands of `experiment` (a gate that named none)."""
    return f"the {gate} of experiment {experiment} ({profile or '-'})"


def _ab_gate(g: GateResult) -> str:
    return f"gate {g.suite} on B" + (" (measured)" if g.source is GateSource.AB_BLOCK else "")


def arm_of(op: Operation, experiment: str) -> str | None:
    """ "A"/"B" when `op` is one of that experiment's blocks (`ab` names it in the reason)."""
    reason = op.reason or ""
    prefix = f"experiment {experiment}: block "
    if op.kind is not Kind.DEPLOY or not reason.startswith(prefix):
        return None
    tail = reason[len(prefix) :]
    return "B" if tail.endswith("(B)") else "A" if tail.endswith("(A)") else None


INHERITS = -1  # own_facts' rank of a gateless rollback: it inherits what it restored


def own_facts(o: Operation) -> tuple[bool, int, str]:
    """What a deploy's or rollback's own records decide (the journal's index keeps it in its
    row): (decided before the arm check, rank, why); rank INHERITS for a proven rollback that
    ran no gate (the best known-good of its commands before it: `inherited`)."""
    if o.status is not Status.SUCCEEDED:
        return True, NOT, f"not known-good: {_ended(o)}"
    if not o.components:
        return True, NOT, "not known-good: it recorded no deployment"
    if o.scope is not None:
        restarted = ", ".join(o.scope.get("restarted") or [])
        return True, NOT, f"not known-good: a partial restart ({restarted}) is not a proven unit"
    if not o.proven:
        return (
            False,
            NOT,
            "not known-good: the unit was never proven by generations through the router",
        )
    gate = gate_of(o)
    if gate is not None and not gate.accepted:
        why = f"known-good: whole unit, served through the router, canary gate {gate.verdict.value}"
        return False, PASSED, why
    if gate is not None:
        return (
            False,
            ACCEPTED,
            (
                f"known-good (below a pass): canary gate {gate.verdict.value}, "
                "accepted with --accept-inconclusive-canary"
            ),
        )
    if o.kind is Kind.ROLLBACK:
        return False, INHERITS, ""
    return False, NOT, "not known-good: no canary gate ran (--no-canary, or an experiment's deploy)"


def arm_judgement(op: str, experiment: str) -> Judgement:
    why = f"a block of A/B experiment {experiment} (an experiment's arm is never known-good)"
    return Judgement(op, NOT, f"not known-good: {why}")


def failed_judgement(op: str, what: str) -> Judgement:
    return Judgement(op, NOT, f"not known-good: its commands failed {what}")


def inherited(op: str, src: Judgement | None) -> Judgement:
    """A gateless rollback's judgement: `src`, the best known-good of its commands before it."""
    if src is None:
        why = "it restored commands that were never known-good (named with --to) and ran no gate"
        return Judgement(op, NOT, f"not known-good: {why}")
    restored = src.why.split(": ", 1)[-1]
    return Judgement(op, src.rank, f"known-good: restored the commands of {src.op} ({restored})")


def gate_of(o: Operation) -> GateResult | None:
    """The first of its GateResults that judged this operation's own deployment and passed (a
    PASS, or an INCONCLUSIVE accepted); None otherwise."""
    return next((g for g in o.gates if g.op == o.op and g.passed), None)


def _ended(o: Operation) -> str:
    if o.status is Status.ROLLED_BACK:
        return "it failed and was rolled back"
    if o.status is Status.FAILED:
        return "it failed"
    if o.status is Status.ABANDONED:
        return "it was interrupted and abandoned"
    return f"it never ended ({o.status.value}: interrupted, or still in flight)"
