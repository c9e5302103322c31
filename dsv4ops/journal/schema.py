"""The journal's record types, declared once: a tagged union (`Record`) of frozen classes with
the record version, one reader (`parse_record`, strict: `RecordError` "where: why") and one writer
(`to_json`); every shipped format reads through one migrator (`migrate`, table `FORMATS`)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from typing import ClassVar, NamedTuple, TypedDict, overload

from dsv4ops.errors import JournalError
from dsv4ops.journal import recordfile
from dsv4ops.journal.gates import GATES_RECORDED, GateResult, GateSource, GateVerdict, legacy_gate
from dsv4ops.jsontypes import JSONObject, JSONValue

RECORD_VERSION = 1


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


class RecordError(JournalError):
    """A line that is no record of the declared types: `where: why`."""


# -- the types ----------------------------------------------------------------------------------
# Optional fields are written only when set, except those a type lists in WRITTEN (written as
# null too: the shape every version since the first wrote, kept byte for byte).


@dataclass(frozen=True)
class BeginRecord:
    """An operation begins: what was asked, by whom, what ran before (`undo`)."""

    TYPE: ClassVar[str] = recordfile.BEGIN
    WRITTEN: ClassVar[tuple[str, ...]] = ("profile", "components", "reason", "undo")
    op: str
    ts: str
    user: str
    kind: Kind
    profile: JSONObject | None = None  # name, path, git_commit, commands_hash, content
    components: list[JSONObject] = dataclasses.field(default_factory=list)
    reason: str | None = None
    undo: JSONObject | None = None
    kernel: JSONObject | None = None  # KERNELS: action, package, previous, config_dir
    scope: JSONObject | None = None  # a partial restart (records.Operation.scope)
    runbook_run: str | None = None  # the runbook run whose step this is
    gates: int | None = None  # GATES_RECORDED: its gates are its steps' GateResults
    v: int = RECORD_VERSION


@dataclass(frozen=True)
class StepRecord:
    """A step starts ('start') or ends ('done' | 'failed'); a gate's end holds its GateResult."""

    TYPE: ClassVar[str] = "step"
    WRITTEN: ClassVar[tuple[str, ...]] = ()
    op: str
    ts: str
    name: str
    phase: str
    duration_s: float | None = None
    detail: str | None = None
    gate: GateResult | None = None
    v: int = RECORD_VERSION


@dataclass(frozen=True)
class StatusRecord:
    """A status transition, with what only the outcome knows."""

    TYPE: ClassVar[str] = "status"
    WRITTEN: ClassVar[tuple[str, ...]] = ()
    op: str
    ts: str
    status: Status
    message: str | None = None
    running: str | None = None  # op id whose deployment runs now ("" nothing, "?" unknown)
    processes: JSONObject | None = None
    kernel: JSONObject | None = None
    known_good: bool | None = None  # True: a SUCCEEDED whole unit proved through the router
    v: int = RECORD_VERSION


@dataclass(frozen=True)
class MergeRecord:
    """An operator-side journal merged into the target's record (journal/target.py)."""

    TYPE: ClassVar[str] = recordfile.MERGE
    WRITTEN: ClassVar[tuple[str, ...]] = ()
    op: str
    ts: str
    user: str
    source: str | None = None
    ops: list[str] = dataclasses.field(default_factory=list)  # the operations it brought in
    records: int | None = None
    v: int = RECORD_VERSION


class BeginFields(TypedDict, total=False):
    """What Journal.begin records beside the kind and the id (BeginRecord's fields)."""

    profile: JSONObject | None  # name, path, git_commit, commands_hash, content
    components: list[JSONObject] | None
    reason: str | None
    undo: JSONObject | None
    user: str | None
    kernel: JSONObject | None
    scope: JSONObject | None  # a partial restart (records.Operation.scope)


class TransitionFields(TypedDict, total=False):
    """What Journal.transition records beside the status (StatusRecord's fields)."""

    message: str | None
    running: str | None
    processes: JSONObject | None
    kernel: JSONObject | None
    known_good: bool


Record = BeginRecord | StepRecord | StatusRecord | MergeRecord
_TYPES: dict[str, type[Record]] = {
    t.TYPE: t for t in (BeginRecord, StepRecord, StatusRecord, MergeRecord)
}
RECORD_TYPES = tuple(_TYPES)


def to_json(rec: Record) -> JSONObject:
    """The record's journal shape (recordfile.encode writes it as one line)."""
    out: JSONObject = {"v": rec.v, "type": rec.TYPE}
    for f in dataclasses.fields(rec):
        value = getattr(rec, f.name)
        if value is None and f.name not in rec.WRITTEN:
            continue
        out[f.name] = _json(value)
    return out


def _json(value: object) -> JSONValue:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, GateResult):
        return value.to_record()
    return value  # the declared fields hold JSON values


# -- the migrator -------------------------------------------------------------------------------


class Format(NamedTuple):
    until: str  # the commit whose change ended it (git log -- dsv4ops/journal)
    lacked: str  # what its records lack that the current format has
    fixture: str  # the real journal of that format under tests/journal/fixtures/


# Every format that shipped (all RECORD_VERSION 1: fields were only ever added), oldest first,
# each with a real journal its version wrote.
FORMATS = (
    Format(
        "84d9f03",
        "status records without the known_good mark (84d9f03 added it: such a deploy is judged "
        "not known-good, as before); no kernel, scope, runbook_run, merge records; components as "
        "the next format's",
        "first_6e6d7b0.jsonl",  # written by 6e6d7b0's own store from its shipped baseline
    ),
    Format(
        "08f3c64",
        "components without bind_host, bootstrap_port, metrics_port (read from their argv by "
        "deployment.Component.from_record); no gates marker",
        "pre_issue12_deploy_box.jsonl",  # a target's journal of the version before 08f3c64
    ),
    Format(
        "f2f11c2",
        "begin without the gates marker, gate steps without a GateResult: `migrate` gives each "
        "the GateResult its version judged it by (gates.legacy_gate)",
        "pre_issue39_gates.jsonl",  # written by the store before f2f11c2
    ),
)

# A field a record of an older format lacks reads as its declared default (components [],
# gates None, a merge's ops []): parse_record needs nothing more of those formats.


@overload
def migrate(rec: StepRecord, begin: BeginRecord) -> StepRecord: ...
@overload
def migrate(rec: Record, begin: BeginRecord) -> Record: ...
def migrate(rec: Record, begin: BeginRecord) -> Record:
    """The one migrator: `rec` (of the operation `begin` opened) in the current format. A gate
    step of an operation begun without the `gates` marker gets the GateResult its version
    judged it by (gates.legacy_gate), so every reader judges GateResults alone."""
    if not isinstance(rec, StepRecord) or rec.gate is not None or begin.gates == GATES_RECORDED:
        return rec
    h = (begin.profile or {}).get("commands_hash")
    g = legacy_gate(rec, begin.op, begin.kind.value, str(h) if h else None)
    return rec if g is None else dataclasses.replace(rec, gate=g)


# -- the parser ---------------------------------------------------------------------------------
# One reader for every field, chosen by its declared type: (is it that type?, its value).


def _is_list(item: type) -> Callable[[object], bool]:
    return lambda v: isinstance(v, list) and all(isinstance(x, item) for x in v)


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


# A value that is set (None is every optional field's "not set"); no reader: the value as it is.
_READ: dict[str, tuple[Callable[[object], bool], Callable[[JSONValue], JSONValue] | None]] = {
    "str": (lambda v: isinstance(v, str), None),
    "str | None": (lambda v: isinstance(v, str), None),
    "JSONObject | None": (lambda v: isinstance(v, dict), None),
    "list[JSONObject]": (_is_list(dict), list),
    "list[str]": (_is_list(str), list),
    "float | None": (_number, float),
    "int | None": (_number, int),
    "bool | None": (lambda v: True, lambda v: True if v is True else None),
    "Kind": (lambda v: v in Kind._value2member_map_, Kind),
    "Status": (lambda v: v in Status._value2member_map_, Status),
    "GateResult | None": (lambda v: True, None),  # read by read_gate (below)
    "bool": (lambda v: True, lambda v: v is True),
    "tuple[str, ...]": (_is_list(str), tuple),
    "GateVerdict": (lambda v: v in GateVerdict._value2member_map_, GateVerdict),
    "GateSource": (lambda v: v in GateSource._value2member_map_, GateSource),
}
_UNKNOWN = {"kind": "operation kind", "status": "status"}  # an enum's value no version wrote
# Each type's required fields and (field, reader) pairs, from its declaration.
_PLAN = {
    cls: (
        [f.name for f in dataclasses.fields(cls) if f.default is f.default_factory is MISSING],
        [(f.name, _READ[str(f.type)]) for f in dataclasses.fields(cls) if f.name != "v"],
    )
    for cls in (*_TYPES.values(), GateResult)
}


def parse_record(obj: object, where: str) -> Record:
    """The typed record a line's JSON holds; RecordError naming `where`."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: journal record is not an object")
    version = obj.get("v")
    if version != RECORD_VERSION:
        raise RecordError(
            f"{where}: journal record version {version!r} is not {RECORD_VERSION}",
            hint="this journal was written by another dsv4ops version",
        )
    cls = _TYPES.get(obj["type"]) if isinstance(obj.get("type"), str) else None
    if cls is None:
        raise RecordError(f"{where}: unknown journal record type {obj.get('type')!r}")
    try:
        values = _values(cls, obj, f"journal {cls.TYPE} record")
    except _Unfit as exc:
        raise RecordError(f"{where}: {exc}") from None
    if "gate" in obj:  # a gate no one can read: a damaged line, never a gate that did not run
        values["gate"] = read_gate(obj["gate"], where)
    return cls(**values)


def read_gate(obj: object, where: str) -> GateResult:
    """The GateResult a step record's `gate` holds (GateResult.to_record's shape); RecordError
    naming `where` if it is not one."""
    try:
        if not isinstance(obj, dict):
            raise _Unfit("not an object")
        return GateResult(**_values(GateResult, obj, "it"))
    except _Unfit as exc:
        raise RecordError(f"{where}: journal step record holds no readable gate ({exc})") from None


class _Unfit(Exception):
    """Why a JSON object is not one of a declared type."""


def _values(cls: type, r: Mapping[str, object], label: str) -> JSONObject:
    """The declared fields of `cls` set in `r` (`label`: what it is, for the why), each read by
    its type. Raises _Unfit."""
    required, fields = _PLAN[cls]
    missing = [k for k in required if not isinstance(r.get(k), str)]
    if missing:
        raise _Unfit(f"{label} lacks {', '.join(missing)}")
    values: dict[str, object] = {}
    for name, (ok, read) in fields:
        if (v := r.get(name)) is None:
            continue  # an optional field not set (a required one is a string: checked above)
        if not ok(v):
            what = _UNKNOWN.get(name)
            raise _Unfit(f"unknown {what} {v!r}" if what else f"{label} has a wrong {name}")
        values[name] = v if read is None else read(v)
    return values
