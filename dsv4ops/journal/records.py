"""Operations folded from the typed records (journal/schema.py) of one `op` id, secret
scrubbing. docs/deploy.md, "The journal"."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.deployment import Deployment
from dsv4ops.journal.gates import GateResult, GateVerdict

# The record types and their enums are declared in journal/schema.py; these names stay here too.
from dsv4ops.journal.schema import RECORD_VERSION as RECORD_VERSION
from dsv4ops.journal.schema import (
    BeginRecord,
    MergeRecord,
    Record,
    StatusRecord,
    StepRecord,
    migrate,
)
from dsv4ops.journal.schema import Kind as Kind
from dsv4ops.journal.schema import Status as Status
from dsv4ops.journal.schema import check_transition as check_transition
from dsv4ops.jsontypes import JSONObject, JSONValue

# One definition of "secret" for every writer (dsv4ops/secrets.py, the bottom layer).
from dsv4ops.secrets import is_secret_key, redact_text, redact_tree


class OperationSummary(TypedDict):
    """An operation in the `journal --json` shape (Operation.summary)."""

    id: str
    kind: str
    when: str
    ended: str | None
    who: str
    profile: str | None
    commit: str | None
    commands_hash: str | None
    status: str
    reason: str | None
    message: str | None
    in_flight: str | None  # the step it was in when it stopped writing (not ended only)
    package: str | None
    known_good: bool
    known_good_why: str | None
    known_good_gate: str | None
    partial: list[str] | None
    runbook_run: str | None
    gates: list[JSONObject]  # each GateResult's record


# What the known-good rule (journal/knowngood.py, view.py) decided of one deploy or rollback.
PASSED, ACCEPTED, NOT = 2, 1, 0  # ranks: a pass, an INCONCLUSIVE accepted, not known-good
_GATE = {PASSED: GateVerdict.PASS, ACCEPTED: GateVerdict.INCONCLUSIVE}  # rank -> its gate's


@dataclass(frozen=True)
class Judgement:
    """Whether one deploy/rollback is known-good, how strongly, and why (in words)."""

    op: str
    rank: int
    why: str

    @property
    def known_good(self) -> bool:
        return self.rank > NOT

    @property
    def gate(self) -> GateVerdict | None:
        """The verdict of the gate that made it known-good: PASS, or INCONCLUSIVE (accepted,
        ranked below every pass); None when it is not known-good."""
        return _GATE.get(self.rank)


class JudgedJSON(TypedDict):
    known_good: bool
    known_good_why: str | None
    known_good_gate: str | None


def judged_json(j: Judgement | None, none_why: str | None = None) -> JudgedJSON:
    """The judgement in every `--json` document that carries one (`journal`, `status`,
    `rollback --dry-run`): `known_good_gate` is the verdict of the gate that made it known-good
    as its enum's value, which readers compare (never the words of `known_good_why`)."""
    gate = j.gate if j is not None else None
    return {
        "known_good": bool(j is not None and j.known_good),
        "known_good_why": j.why if j is not None else none_why,
        "known_good_gate": gate.value if gate is not None else None,
    }


@dataclass
class Operation:
    """One deploy/rollback/stop as folded from its records."""

    op: str
    kind: Kind
    ts: str
    user: str
    status: Status = Status.PENDING
    profile: JSONObject | None = None  # name, path, git_commit, commands_hash, content
    components: list[JSONObject] = field(default_factory=list)  # rendered, secrets redacted
    reason: str | None = None
    undo: JSONObject | None = None  # what ran before: op id + profile summary
    steps: list[StepRecord] = field(default_factory=list)
    message: str | None = None
    running: str | None = None  # op id whose deployment runs after this one ended ("" = nothing)
    processes: JSONObject = field(default_factory=dict)  # name -> {pid, started_at}
    ended: str | None = None
    kernel: JSONObject | None = None  # KERNELS: action, package, previous, config_dir
    # What a partial restart (`deploy --only`) restarted and whose components it kept running:
    # {"restarted": [names], "kept_from": op id, "kept_profile": name, "profile_hash": hash of
    # the asked profile's own commands}. None for a whole-unit operation.
    scope: JSONObject | None = None
    # Set only by the SUCCEEDED transition of a deploy/rollback that restarted the whole unit
    # from one profile's rendered commands and proved it with generations through the router.
    marked_known_good: bool = False
    # The runbook run (its op id) whose step ran this operation ($DSV4OPS_RUNBOOK_RUN).
    runbook_run: str | None = None
    # The GateResults that judged it or that it ran (an older version's: migrated, schema.py).
    gates: list[GateResult] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        """This exact whole unit served a proven generation through the router (its SUCCEEDED
        said so): necessary for known-good, not sufficient (journal/knowngood.py)."""
        return (
            self.kind in (Kind.DEPLOY, Kind.ROLLBACK)
            and self.status is Status.SUCCEEDED
            and bool(self.components)
            and self.marked_known_good
        )

    @property
    def step_in_flight(self) -> str | None:
        """Name of the last step started but not finished (None when none)."""
        open_steps: dict[str, StepRecord] = {}
        for s in self.steps:
            if s.phase == "start":
                open_steps[s.name] = s
            else:
                open_steps.pop(s.name, None)
        return list(open_steps)[-1] if open_steps else None

    @property
    def position(self) -> str:
        """Where the operation got to: "during 'X'", "after 'Y'" or "before its first step"."""
        flying = self.step_in_flight
        if flying:
            return f"during '{flying}'"
        if self.steps:
            return f"after '{self.steps[-1].name}'"
        return "before its first step"

    @property
    def profile_name(self) -> str | None:
        return (self.profile or {}).get("name")

    def deployment(self, *, unread: Collection[str] = ()) -> Deployment:
        """The exact Deployment this operation recorded (Deployment.to_record, any version).
        Raises DeployError when it recorded no components. `unread`: component fields a
        read-only reader does not need (Component.from_record)."""
        return Deployment.from_record(
            self.profile, self.components, source_op=self.op, unread=unread
        )

    def summary(self, judgement: Judgement | None = None) -> OperationSummary:
        """The operation in the `journal --json` shape; `judgement` is its
        Judgement (None: not a deploy or rollback, never known-good)."""
        p = self.profile or {}
        return {
            "id": self.op,
            "kind": self.kind.value,
            "when": self.ts,
            "ended": self.ended,
            "who": self.user,
            "profile": p.get("name"),
            "commit": p.get("git_commit"),
            "commands_hash": p.get("commands_hash"),
            "status": self.status.value,
            "reason": self.reason,
            "message": self.message,
            "in_flight": None if self.status.terminal else self.step_in_flight,
            "package": (self.kernel or {}).get("package") or p.get("kernel_package"),
            **judged_json(judgement),
            "partial": (self.scope or {}).get("restarted"),
            "runbook_run": self.runbook_run,
            "gates": [g.to_record() for g in self.gates],
        }


# ---------------------------------------------------------------------------------------------
# Secrets never reach the file: keys that look secret are blanked, secret argv flags are
# redacted, and any value of a secret-looking variable in this process's environment is
# replaced wherever it appears (a token pasted into a profile value, a reason, a log tail).


def scrub(value: JSONValue, *, key: str | None = None) -> JSONValue:
    """Deep copy of value with secrets replaced by '***'."""
    return redact_tree(value, key=key, text=_scrub_env_values)


def _scrub_env_values(text: str) -> str:
    """This process's secret env values, then the secret shapes of free text (secrets.py)."""
    values = [v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= 6 and v in text]
    return redact_text(text, values)


def fold_into(records: Sequence[Record]) -> dict[str, Operation]:
    """op id -> Operation folded from `records` (in begin order), each record through the one
    migrator (schema.migrate). A second begin under an id already begun, the records after it,
    and records of no begun operation are not this operation's: skipped (the index reports
    them: journal/damage.py)."""
    ops: dict[str, Operation] = {}
    begins: dict[str, BeginRecord] = {}
    taken: set[str] = set()
    for r in records:
        op_id = r.op
        if isinstance(r, MergeRecord) or op_id in taken:
            continue
        if isinstance(r, BeginRecord):
            if op_id in ops:
                taken.add(op_id)
                continue
            begins[op_id], ops[op_id] = r, _begun(r)
            continue
        op = ops.get(op_id)
        if op is None:
            continue
        if isinstance(r, StepRecord):
            r = migrate(r, begins[op_id])
            op.steps.append(r)
            if r.gate is not None:
                op.gates.append(r.gate)
        else:
            _apply_end(op, r)
    return ops


def _begun(r: BeginRecord) -> Operation:
    """The Operation a `begin` record opens."""
    return Operation(
        op=r.op,
        kind=r.kind,
        ts=r.ts,
        user=r.user,
        profile=r.profile,
        components=list(r.components),
        reason=r.reason,
        undo=r.undo,
        kernel=r.kernel,
        scope=r.scope,
        runbook_run=r.runbook_run,
    )


def _apply_end(op: Operation, r: StatusRecord) -> None:
    """A status record applied to `op`."""
    op.status = r.status
    if r.message is not None:
        op.message = r.message
    if r.running is not None:
        op.running = r.running
    if r.processes:
        op.processes = dict(r.processes)
    if r.known_good:
        op.marked_known_good = True
    if r.kernel is not None:
        op.kernel = {**(op.kernel or {}), **r.kernel}
    if op.status.terminal:
        op.ended = r.ts


def undo_of(prev: Operation | None) -> JSONObject:
    """A begin record's `undo`: the operation whose deployment ran before (None: nothing)."""
    if prev is None:
        return {"previous": None}
    return {
        "previous": prev.op,
        "previous_profile": prev.profile,
        "previous_components": prev.components,
    }
