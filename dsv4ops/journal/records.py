"""Journal records: the status enum, the record shapes, validation on read, secret scrubbing.

A journal is a sequence of small JSON records, one per line. Every operation (deploy, rollback,
stop, recover) is one `begin` record followed by `step` and `status` records sharing its `op`
id. Folding them gives an `Operation`: what was asked, which step was in flight, how it ended and
what was left running.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from dsv4ops.deployment import Deployment
from dsv4ops.errors import JournalError
from dsv4ops.journal.gates import GATES_RECORDED, GateResult, gate_results
from dsv4ops.jsontypes import JSONObject, JSONValue

# One definition of "secret" for every writer (dsv4ops/secrets.py, the bottom layer).
from dsv4ops.secrets import is_secret_key, redact_text, redact_tree

RECORD_VERSION = 1
# "merge" journals the one-time merge of an operator-side journal into the target's record
# (dsv4ops/journal/target.py): who, from where, which operations it brought in.
RECORD_TYPES = ("begin", "step", "status", "merge")


class Judged(Protocol):
    """What `Operation.summary` reads of a `knowngood.Judgement` (which imports this module)."""

    @property
    def known_good(self) -> bool: ...

    @property
    def why(self) -> str: ...


class Placeable(Protocol):
    """What `place_by` reads of an operation or an index entry: its id and begin time."""

    @property
    def op(self) -> str: ...

    @property
    def ts(self) -> str: ...


P = TypeVar("P", bound=Placeable)


class Status(str, enum.Enum):
    """Life cycle of one operation; persisted at every transition."""

    PENDING = "PENDING"  # recorded, nothing changed on the target yet
    RUNNING = "RUNNING"  # the target is being changed
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"  # failed and could not restore the previous deployment
    ROLLED_BACK = "ROLLED_BACK"  # failed, and the last known-good deployment was restored
    ABANDONED = "ABANDONED"  # the CLI died mid-operation; a later command resolved it
    # Stopped where it can be resumed, by the process that ran it (a runbook run that stopped at
    # a failed step, a refusal or Ctrl-C): not terminal, `--resume` moves it back to RUNNING.
    INTERRUPTED = "INTERRUPTED"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.ROLLED_BACK, Status.ABANDONED})
_ALLOWED: dict[Status, frozenset[Status]] = {
    Status.PENDING: frozenset({Status.RUNNING, Status.FAILED, Status.ABANDONED, Status.SUCCEEDED}),
    Status.RUNNING: _TERMINAL | {Status.INTERRUPTED},
    Status.INTERRUPTED: _TERMINAL | {Status.RUNNING},
}


def check_transition(old: Status, new: Status) -> None:
    """Raise JournalError unless old -> new is a legal status change."""
    if new not in _ALLOWED.get(old, frozenset()):
        raise JournalError(f"illegal journal transition {old.value} -> {new.value}")


class Kind(str, enum.Enum):
    DEPLOY = "deploy"
    ROLLBACK = "rollback"
    STOP = "stop"
    # `dsv4ops kernels deploy|rollback`: switches the target's tuned-kernel package. It starts
    # or stops no process, so it never sets `running` and never counts as a deployment.
    KERNELS = "kernels"
    # `dsv4ops ab`: an A/B experiment. Its blocks' deploys are journaled as DEPLOYs of their own
    # (each names the experiment in its reason); the experiment itself starts no process, so it
    # never sets `running` and never counts as a deployment or as known-good.
    EXPERIMENT = "experiment"
    # `dsv4ops runbook run`: one run of a runbook, each step a journal step. It changes nothing
    # itself (the commands it runs journal themselves), so it is never in flight for them,
    # never a deployment and never known-good.
    RUNBOOK = "runbook"
    # `dsv4ops twin hazard`: a twin hazard switched on purpose (a rehearsal), with who and why.
    # It starts or stops no process: never a deployment, never known-good.
    HAZARD = "hazard"

    @property
    def changes_target(self) -> bool:
        """False for the runbook run that only drives other operations."""
        return self is not Kind.RUNBOOK


@dataclass
class StepRecord:
    name: str
    phase: str  # "start" | "done" | "failed"
    ts: str
    duration_s: float | None = None
    detail: str | None = None


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
    # Its GateResults, and whether it records them (if not, gates.gate_results migrates).
    gates: list[GateResult] = field(default_factory=list)
    records_gates: bool = False

    @property
    def proven(self) -> bool:
        """This exact whole unit served a proven generation through the router: the operation
        said so when it SUCCEEDED; a partial restart, a stop or a kernel switch never does.
        Necessary for known-good, not sufficient: known-good is judged over the whole journal
        (its gate, the experiment it belongs to, gates its commands failed elsewhere) in ONE
        place, `dsv4ops.journal.knowngood`."""
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

    def deployment(self) -> Deployment:
        """The exact Deployment this operation recorded (Deployment.to_record, any version).
        Raises DeployError when it recorded no components."""
        return Deployment.from_record(self.profile, self.components, source_op=self.op)

    def summary(self, judgement: Judged | None = None) -> JSONObject:
        """The operation in the `journal --json` shape; `judgement` is its
        `knowngood.Judgement` (None: not a deploy or rollback, never known-good)."""
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
            "known_good": bool(judgement is not None and judgement.known_good),
            "known_good_why": judgement.why if judgement is not None else None,
            "partial": (self.scope or {}).get("restarted"),
            "runbook_run": self.runbook_run,
            "gates": [g.to_record() for g in gate_results(self)],
        }


# ---------------------------------------------------------------------------------------------
# Secrets never reach the file: keys that look secret are blanked, secret argv flags are
# redacted, and any value of a secret-looking variable in this process's environment is
# replaced wherever it appears (a token pasted into a profile value, a reason, a log tail).


def scrub(value: JSONValue, *, key: str | None = None) -> JSONValue:
    """Deep copy of value with secrets replaced by '***'."""
    return redact_tree(value, key=key, text=_scrub_env_values)


def _scrub_env_values(text: str) -> str:
    """This process's secret env values, then the secret shapes of free text (a log tail or an
    argv quoted in a message: `--admin-api-key V`, `api_key='V'`, a URL's password)."""
    values = [v for k, v in os.environ.items() if is_secret_key(k) and len(v) >= 6 and v in text]
    return redact_text(text, values)


# ---------------------------------------------------------------------------------------------
# Validation on read: a record that parses as JSON but has the wrong shape is a format error.

_REQUIRED: dict[str, tuple[str, ...]] = {
    "begin": ("op", "kind", "ts", "user"),
    "step": ("op", "ts", "name", "phase"),
    "status": ("op", "ts", "status"),
    "merge": ("op", "ts", "user"),
}


def validate(record: object, where: str) -> JSONObject:
    """Return record if it is a well-formed journal record; raise JournalError naming `where`."""
    if not isinstance(record, dict):
        raise JournalError(f"{where}: journal record is not an object")
    version = record.get("v")
    if version != RECORD_VERSION:
        raise JournalError(
            f"{where}: journal record version {version!r} is not {RECORD_VERSION}",
            hint="this journal was written by another dsv4ops version",
        )
    rtype = record.get("type")
    if rtype not in _REQUIRED:
        raise JournalError(f"{where}: unknown journal record type {rtype!r}")
    missing = [k for k in _REQUIRED[rtype] if not isinstance(record.get(k), str)]
    if missing:
        raise JournalError(f"{where}: journal {rtype} record lacks {', '.join(missing)}")
    if rtype == "begin" and record["kind"] not in {k.value for k in Kind}:
        raise JournalError(f"{where}: unknown operation kind {record['kind']!r}")
    if rtype == "status" and record["status"] not in {s.value for s in Status}:
        raise JournalError(f"{where}: unknown status {record['status']!r}")
    if rtype == "step" and "gate" in record:
        GateResult.from_record(record["gate"], where)  # a gate no one can read: a damaged line
    return record


def fold(records: list[JSONObject]) -> list[Operation]:
    """Operations in the order they began, each with its latest status applied."""
    return list(fold_into({}, records).values())


def fold_into(ops: dict[str, Operation], records: list[JSONObject]) -> dict[str, Operation]:
    """`ops` (folded from earlier records, in begin order) with `records` applied: a new dict;
    an operation these records change is a copy, so Operations handed out before stay as they
    were (journal/index.py re-folds the operations appended records touch this way). A second
    begin under an id already begun, the records after it, and records of no begun operation
    are not this operation's: skipped (the index reports them: journal/damage.py)."""
    ops = dict(ops)
    copied: set[str] = set()
    taken: set[str] = set()
    for r in records:
        op_id = r["op"]
        if r["type"] == "merge" or op_id in taken:
            continue
        if r["type"] == "begin":
            if op_id in ops:
                taken.add(op_id)
                continue
            copied.add(op_id)
            ops[op_id] = _begun(r)
            continue
        op = ops.get(op_id)
        if op is None:
            continue
        if op_id not in copied:
            op = ops[op_id] = replace(
                op, steps=list(op.steps), processes=dict(op.processes), gates=list(op.gates)
            )
            copied.add(op_id)
        if r["type"] == "step":
            op.steps.append(
                StepRecord(r["name"], r["phase"], r["ts"], r.get("duration_s"), r.get("detail"))
            )
            if "gate" in r:  # validate() read it once: a well-formed gate
                op.gates.append(GateResult.from_record(r["gate"], op_id))
        else:
            _apply_end(op, r)
    return ops


def _begun(r: JSONObject) -> Operation:
    """The Operation a `begin` record opens."""
    return Operation(
        op=r["op"],
        kind=Kind(r["kind"]),
        ts=r["ts"],
        user=r["user"],
        profile=r.get("profile"),
        components=list(r.get("components") or []),
        reason=r.get("reason"),
        undo=r.get("undo"),
        kernel=r.get("kernel"),
        scope=r.get("scope") if isinstance(r.get("scope"), dict) else None,
        runbook_run=r.get("runbook_run") if isinstance(r.get("runbook_run"), str) else None,
        records_gates=r.get("gates") == GATES_RECORDED,
    )


def _apply_end(op: Operation, r: JSONObject) -> None:
    """An `end` (or status) record applied to `op` (a copy this fold owns)."""
    op.status = Status(r["status"])
    if r.get("message") is not None:
        op.message = r["message"]
    if "running" in r:
        op.running = r["running"]
    if r.get("processes"):
        op.processes = dict(r["processes"])
    if r.get("known_good") is True:
        op.marked_known_good = True
    if isinstance(r.get("kernel"), dict):
        op.kernel = {**(op.kernel or {}), **r["kernel"]}
    if op.status.terminal:
        op.ended = r["ts"]


def place_merged(ops: list[Operation], records: list[JSONObject]) -> list[Operation]:
    """`ops` with each operation a merge brought in placed by its begin time among the others.

    The target's own records are in the order they happened (one writer at a time, under the
    deploy lock), so their order stands; an operation merged from an operator-side journal was
    appended later than it happened and takes its place by its timestamp instead."""
    merged = {op for r in records if r["type"] == "merge" for op in r.get("ops") or []}
    if not merged:
        return ops
    # A native operation begun after the merge record began after every operation merged by it
    # (the merge is the first thing a command does): it follows them even within one second.
    after_first_merge: set[str] = set()
    seen_merge = False
    for r in records:
        if r["type"] == "merge":
            seen_merge = True
        elif r["type"] == "begin" and seen_merge:
            after_first_merge.add(r["op"])
    return place_by(ops, merged, after_first_merge)


def place_by(ops: list[P], merged: set[str], after_first_merge: set[str]) -> list[P]:
    """place_merged's rule given what it reads of the records: the ops merges brought in, and
    the ops begun after the first merge record (anything with .op and .ts: journal/index.py
    places its entries by the same rule)."""
    if not merged:
        return ops
    after_merge = after_first_merge - merged
    out = [o for o in ops if o.op not in merged]
    for o in (o for o in ops if o.op in merged):
        at = next(
            (i for i, n in enumerate(out) if n.ts > o.ts or (n.op in after_merge and n.ts >= o.ts)),
            len(out),
        )
        out.insert(at, o)
    return out


def undo_of(prev: Operation | None) -> JSONObject:
    """A begin record's `undo`: the operation whose deployment ran before (None: nothing)."""
    if prev is None:
        return {"previous": None}
    return {
        "previous": prev.op,
        "previous_profile": prev.profile,
        "previous_components": prev.components,
    }
