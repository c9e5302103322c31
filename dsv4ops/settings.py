"""Declared settings: a profile section whose keys are each declared once, as one field of a
frozen dataclass, and everything else derived from that declaration (as pre-commit derives its
config checks from one schema).

One line declares a setting: its name (the field's), its type (the annotation), its default,
bounds and doc (`setting(...)`). From the dataclass come

* the section's pydantic model (`profiles/profile_spec.py`: `section_model`), so the loader
  validates it;
* the section's value on `Profile` (`from_values`: the dataclass itself, built by name);
* its value from a journal record (`from_record`: a value that does not fit raises
  `UnfitValue`; a redacted '***' of an older release is at the default);
* the profile reference's table and JSON Schema (through the section's schema:
  `profiles/reference.py`, `profiles/json_schema.py`);
* in the canary, the thresholds (`canary.verdict.Thresholds` derives from `CanaryThresholds`).

The declared sections themselves (`CanaryThresholds`, `ProbeSettings`) are at the end of this
module, below `deployment.py`, so the deployment carries them typed (`Deployment.canary`,
`Deployment.probe`); `profiles/model.py` re-exports them for the profile.

To add a setting to a declared section, add one field; to add a declared section, declare its
dataclass like `CanaryThresholds` (here), give it a key in `ProfileSpec`
(`section_model(TheClass)`, profiles/profile_spec.py), a field on `Profile` and a `from_values`
line in build.py.

Bottom layer: imports only `jsontypes`. Pure data; no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from dsv4ops.jsontypes import JSONValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    S = TypeVar("S", bound=DataclassInstance)
else:
    S = TypeVar("S")

T = TypeVar("T")

_METADATA_KEY = "dsv4ops.setting"

# The annotation of a declared field -> its schema kind (profiles/profile_spec.section_model).
_KINDS: dict[object, str] = {
    int: "int",
    float: "float",
    bool: "bool",
    str: "str",
    tuple[int, ...]: "int_list",
    tuple[str, ...]: "str_list",
}


@dataclass(frozen=True)
class Bounds:
    """What `setting` records next to the default: bounds (of each item of a list), the most
    items of a list, and the doc the reference prints."""

    doc: str
    minimum: float | None = None
    maximum: float | None = None
    max_items: int | None = None
    choices: tuple[str, ...] | None = None  # the only values a str setting may take


@dataclass(frozen=True)
class Declared:
    """One declared setting as everything derived from it reads it."""

    name: str
    kind: str  # a profiles.schema.Field kind
    nullable: bool
    default: object
    bounds: Bounds


def setting(
    default: T,
    *,
    doc: str,
    minimum: float | None = None,
    maximum: float | None = None,
    max_items: int | None = None,
    choices: tuple[str, ...] | None = None,
) -> T:
    """Declare one field of a settings dataclass (its default, bounds, choices and doc)."""
    bounds = Bounds(doc, minimum, maximum, max_items, choices)
    return dataclasses.field(default=default, metadata={_METADATA_KEY: bounds})


def declared(cls: type[DataclassInstance]) -> Iterator[Declared]:
    """The declared settings of `cls`, in declaration order. Raises TypeError for a field not
    declared with `setting` or of a type no schema kind validates (a mistake in the code)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        bounds = f.metadata.get(_METADATA_KEY)
        if not isinstance(bounds, Bounds):
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with setting()")
        kind, nullable = _kind(hints[f.name])
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no schema kind for {hints[f.name]!r}")
        yield Declared(f.name, kind, nullable, f.default, bounds)


def _kind(annotation: object) -> tuple[str | None, bool]:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (_KINDS.get(rest[0]) if len(rest) == 1 else None), True
    return _KINDS.get(annotation), False


def from_values(cls: type[S], values: Mapping[str, JSONValue]) -> S:
    """The section built from its normalized values (checked by the schema: every declared key
    is there, of its type). Lists become tuples: the section is frozen."""
    changes = {d.name: _frozen(values[d.name]) for d in declared(cls)}
    return dataclasses.replace(cls(), **changes)


class UnfitValue(ValueError):
    """A recorded value that does not fit its declared setting: `name` the setting (empty for
    the section itself), `value` what the record holds, `expected` what the declaration takes."""

    def __init__(self, name: str, value: object, expected: str) -> None:
        super().__init__(f"{name or 'the section'}: {value!r} is not {expected}")
        self.name = name
        self.value = value
        self.expected = expected


def from_record(cls: type[S], record: object, *, redacted: str | None = None) -> S:
    """The section as a journal recorded it, read through its declaration: the one reader of a
    recorded section. A setting the record lacks (one added since it was written; a record of
    no section at all) is at its default, which is what that release ran; a key the declaration
    does not know (one removed since) is ignored; a value equal to `redacted` (a release before
    15ec807 blanked thresholds whose names mention tokens, as if secrets) is not known, so it too
    is at its default. Any other value that does not fit its declared type or choices raises
    UnfitValue: it is never replaced by the default without a word."""
    if record is None:
        return cls()
    if not isinstance(record, Mapping):
        raise UnfitValue("", record, "a mapping of settings")
    changes: dict[str, object] = {}
    for d in declared(cls):
        if d.name not in record:
            continue
        value = record[d.name]
        if redacted is not None and value == redacted:
            continue
        if value is None and d.nullable:
            changes[d.name] = None
            continue
        if value is None or not _fits(d.kind, value):
            raise UnfitValue(d.name, value, _EXPECTED[d.kind])
        choices = d.bounds.choices
        if choices is not None and value not in choices:
            raise UnfitValue(d.name, value, "one of " + ", ".join(choices))
        changes[d.name] = _frozen(value)
        if d.kind == "float" and isinstance(value, int):  # a YAML 2 where 2.0 is meant
            changes[d.name] = float(value)
    return dataclasses.replace(cls(), **changes)


_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "int_list": "a list of integers",
    "str_list": "a list of strings",
}


def extended(cls: type[S], section: DataclassInstance) -> S:
    """A `cls` (a dataclass that extends the section's class with settings of its own, such as
    the canary's Thresholds) holding the section's declared settings, its own at their
    defaults."""
    base = type(section)
    if base not in cls.__mro__:
        raise TypeError(f"{cls.__name__} does not extend {base.__name__}")
    return dataclasses.replace(cls(), **{d.name: section.__dict__[d.name] for d in declared(base)})


def _frozen(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _fits(kind: str, value: object) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, int | float) and math.isfinite(value)
    if kind == "int_list":
        return isinstance(value, list | tuple) and all(_fits("int", v) for v in value)
    if kind == "str_list":
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    return isinstance(value, str)


# Bounds of the canary's concurrency levels.
MAX_CONCURRENCY = 4096
# How the deploy's end-to-end probe asks for its tool call (orchestrate/probe.py): forced with
# `tool_choice: required` (SGLang constrains the output to the parser's call grammar), asked with
# `auto` (the parser must still find a call), or not asked at all.
PROBE_TOOL_CALL = ("required", "auto", "off")


@dataclass(frozen=True)
class CanaryThresholds:
    """The profile's `canary` section: what the canary suites judge a deployment by (units in
    the names). Each field is the one declaration of its setting (dsv4ops/settings.py): the
    schema, this value, the journal record's reading, docs/profiles.md's table and the canary's
    `Thresholds` all derive from it. To add a setting, add a field here."""

    smoke_requests: int = setting(
        8, minimum=1, maximum=10_000, doc="requests the smoke suite sends"
    )
    corruption_max_rate: float = setting(
        0.0, minimum=0.0, maximum=1.0, doc="share of corrupted tool calls tolerated"
    )
    consistency_min_agreement: float = setting(
        0.95, minimum=0.0, maximum=1.0, doc="agreement of answers at concurrency 1 and under load"
    )
    first_token_deadline_s: float = setting(
        60.0, minimum=0.0, maximum=3600.0, doc="seconds a request may wait for its first token"
    )
    # Per-request backstop: a request still open after this long is cut and counted as a hang.
    hang_deadline_s: float = setting(
        120.0, minimum=0.0, maximum=3600.0, doc="seconds after which an open request is a hang"
    )
    abort_cascade_recovery_s: float = setting(
        60.0,
        minimum=0.0,
        maximum=3600.0,
        doc="seconds for running + queued to get back after aborts",
    )
    stress_concurrency: int = setting(
        80, minimum=1, maximum=MAX_CONCURRENCY, doc="sessions of the corruption suite's load"
    )
    stress_duration_s: float = setting(
        120.0, minimum=0.0, maximum=86400.0, doc="seconds of soak load (and an A/B block)"
    )
    # How long the deploy's (and rollback's) gate runs each flag-aware suite (the corruption,
    # abort-cascade and sweep suites a flag change calls for; smoke sends its request count).
    # `deploy --canary-duration` overrides it for one deploy; a runbook's deploy, whose command
    # text is the box's, gets it from the profile.
    gate_duration_s: float = setting(
        20.0,
        minimum=1.0,
        maximum=3600.0,
        doc="seconds of each flag-aware suite in the deploy's canary gate",
    )
    sweep_concurrency: tuple[int, ...] = setting(
        (32, 48, 56, 57, 64, 72, 80, 88, 96),
        minimum=1,
        maximum=MAX_CONCURRENCY,
        max_items=64,
        doc="the sweep's concurrency staircase",
    )
    # Seconds at each level of a `canary --suite sweep` (its first 30 % is warm-up; `--duration`
    # splits its seconds over the levels instead, as the deploy's gate does): long enough for
    # several decode metric reports and a steady window on the deployment's step time.
    sweep_level_s: float = setting(
        6.0, minimum=1.0, maximum=3600.0, doc="seconds of each sweep level (30 % warm-up)"
    )
    sweep_throughput_tolerance_pct: float = setting(
        5.0, minimum=0.0, maximum=100.0, doc="distance from the throughput law a level may fall"
    )
    sawtooth_max_drop_pct: float = setting(
        5.0, minimum=0.0, maximum=100.0, doc="drop past a CUDA-graph bucket that is a sawtooth"
    )
    # Hang watchdog: a stream silent this long is stalled; no token anywhere this long is a
    # server-wide freeze (and the floor of the metrics-side no-progress window). 2 s keeps
    # detection under 3 s, far below SGLang's 300 s timeouts.
    stall_s: float = setting(
        2.0, minimum=0.1, maximum=600.0, doc="seconds a stream may be silent before it is stalled"
    )
    freeze_s: float = setting(
        2.0, minimum=0.1, maximum=600.0, doc="seconds without a token anywhere that are a freeze"
    )
    # Run the suites with chat_template_kwargs.thinking (needs model.reasoning_parser);
    # tool-call requests get thinking_budget_tokens more max_tokens for the reasoning.
    thinking: bool = setting(False, doc="suites ask for reasoning (chat_template_kwargs)")
    thinking_budget_tokens: int = setting(
        1024, minimum=1, maximum=131072, doc="extra max_tokens of a request when thinking"
    )
    # The suites' tool-call requests (a nonce echoed in the call's arguments). A model that
    # cannot copy text from its prompt (the tiny CPU model) declares false: the suites send
    # none, corruption answers INCONCLUSIVE, and every verdict says the checks were off.
    tool_calls: bool = setting(True, doc="suites send tool-call requests")


@dataclass(frozen=True)
class ProbeSettings:
    """The profile's `probe` section: how the deploy's end-to-end probe checks the deployed model
    (orchestrate/probe.py). Declared like `CanaryThresholds` (dsv4ops/settings.py)."""

    # What the deployed model can do, declared: DSV4 spells a forced call; a model that cannot
    # satisfy the call grammar (the tiny CPU model, docs/twin.md) says `auto`, one that calls no
    # tools `off`. A deploy whose probe skipped or did not force the call says so.
    tool_call: str = setting(
        "required",
        choices=PROBE_TOOL_CALL,
        doc="the probe's tool call: forced (required), offered (auto) or not sent (off)",
    )
