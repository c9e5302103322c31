"""Declared settings: a section whose keys are each declared once, as one field of a frozen
pydantic model (`Settings`): its type (the annotation), its default, bounds or choices and doc
(`Field(...)`). Everything else reads that declaration:

* the profile's `canary` and `probe` keys are these models (`profiles/profile_spec.py`), so the
  loader validates a profile by them, and the loaded `Profile` holds them as they are;
* a journal record is read back through the same model (`Settings.from_record`: a value that
  does not fit raises `UnfitValue`; a redacted '***' of an older release is at the default);
* the profile reference's table and JSON Schema are the model's schema (`profiles/reference.py`,
  `profiles/json_schema.py`);
* in the canary, the thresholds (`canary.verdict.Thresholds` extends `CanaryThresholds`).

The declared sections (`CanaryThresholds`, `ProbeSettings`) live here, below `deployment.py`, so
the deployment carries them typed (`Deployment.canary`, `Deployment.probe`); `profiles/model.py`
re-exports them for the profile. What a deployment reads of the rest of its record is declared
the same way in recorded.py.

To add a setting to a declared section, add one field; to add a declared section, declare its
model like `CanaryThresholds` (here), give it a key in `ProfileSpec` (profiles/profile_spec.py)
and a field on `Profile` (build.py passes it on).

Bottom layer: imports only pydantic. Pure data; no I/O.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from dsv4ops.constants import MAX_CONCURRENCY


def _tuple(value: object) -> object:
    # A YAML or JSON list is the tuple the frozen model holds (strict mode takes only tuples).
    return tuple(value) if isinstance(value, list) else value


# A list setting: held as a tuple (frozen, hashable), written as a list in YAML and JSON.
IntTuple = Annotated[tuple[int, ...], BeforeValidator(_tuple)]


class Settings(BaseModel):
    """A declared section: frozen, unknown keys refused (the JSON Schema's
    additionalProperties: false), no type coerced but an integer where a number is meant."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    @classmethod
    def from_record(cls, record: object, *, redacted: str | None = None) -> Self:
        """The section as a journal recorded it, read through its model: the one reader of a
        recorded section. A setting the record lacks (one added since it was written; a record
        of no section at all) is at its default, which is what that release ran; a key the model
        does not know (one removed since) is ignored; a value equal to `redacted` (a release
        before 15ec807 blanked thresholds whose names mention tokens, as if secrets) is not
        known, so it too is at its default. Any other value that does not fit its declared type
        or choices raises UnfitValue: it is never replaced by the default without a word."""
        if record is None:
            return cls()
        if not isinstance(record, Mapping):
            raise UnfitValue("", record, "a mapping of settings")
        known = {
            key: value
            for key, value in record.items()
            if key in cls.model_fields and (redacted is None or value != redacted)
        }
        try:
            return cls.model_validate(known)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        unfit = next((e for e in errors if e["type"] not in _BOUNDS), None)
        if unfit is not None:
            name = str(unfit["loc"][0])
            raise UnfitValue(name, known[name], _expected(cls.model_fields[name]))
        # Of its type but outside today's bounds: read as recorded, since the bounds may have
        # changed and that deployment ran with the value (docs/deploy.md, "Recorded settings").
        outside = {str(e["loc"][0]) for e in errors}
        inside = cls.model_validate({k: v for k, v in known.items() if k not in outside})
        return inside.model_copy(update={k: _as_held(cls, k, known[k]) for k in outside})


# The errors of a value of its type that passes a bound (a number's, a list's length or items').
_BOUNDS = frozenset({"greater_than_equal", "less_than_equal", "too_long"})


def _as_held(cls: type[Settings], name: str, value: object) -> object:
    """A recorded value of its type as the model holds it: a list as a tuple, a number where a
    float is declared as a float (only numbers and lists have bounds)."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, int) and cls.model_fields[name].annotation is float:
        return float(value)
    return value


class UnfitValue(ValueError):
    """A recorded value that does not fit its declared setting: `name` the setting (empty for
    the section itself), `value` what the record holds, `expected` what the declaration takes."""

    def __init__(self, name: str, value: object, expected: str) -> None:
        super().__init__(f"{name or 'the section'}: {value!r} is not {expected}")
        self.name = name
        self.value = value
        self.expected = expected


_WORDS: dict[object, str] = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a string",
}


def _expected(info: FieldInfo) -> str:
    """What a declared setting takes, in the words the readers print."""
    kind = info.annotation
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # `X | None`
        kind = next(a for a in args if a is not type(None))
        args = typing.get_args(kind)
    if typing.get_origin(kind) is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in kind)
    if typing.get_origin(kind) is tuple:
        item = typing.get_args(args[0])[0] if typing.get_origin(args[0]) is Annotated else args[0]
        return "a list of integers" if item is int else "a list of strings"
    return _WORDS[kind]


# How the deploy's end-to-end probe asks for its tool call (orchestrate/probe.py): forced with
# `tool_choice: required` (SGLang constrains the output to the parser's call grammar), asked with
# `auto` (the parser must still find a call), or not asked at all.
ProbeToolCall = Literal["required", "auto", "off"]
PROBE_TOOL_CALL: tuple[str, ...] = typing.get_args(ProbeToolCall)
Concurrencies = Annotated[
    tuple[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)], ...], BeforeValidator(_tuple)
]


# The profile's `canary` section: what the canary suites judge a deployment by (units in the
# names). Each field is the one declaration of its setting: the profile's schema, its value, the
# journal record's reading, docs/profiles.md's table and the canary's `Thresholds` all derive
# from it. To add a setting, add a field here. (Comments, not a docstring: a docstring would be
# the section's description in the shipped JSON Schema.)
class CanaryThresholds(Settings):
    smoke_requests: int = Field(8, ge=1, le=10_000, description="requests the smoke suite sends")
    corruption_max_rate: float = Field(
        0.0, ge=0.0, le=1.0, description="share of corrupted tool calls tolerated"
    )
    consistency_min_agreement: float = Field(
        0.95, ge=0.0, le=1.0, description="agreement of answers at concurrency 1 and under load"
    )
    first_token_deadline_s: float = Field(
        60.0, ge=0.0, le=3600.0, description="seconds a request may wait for its first token"
    )
    # Per-request backstop: a request still open after this long is cut and counted as a hang.
    hang_deadline_s: float = Field(
        120.0, ge=0.0, le=3600.0, description="seconds after which an open request is a hang"
    )
    abort_cascade_recovery_s: float = Field(
        60.0,
        ge=0.0,
        le=3600.0,
        description="seconds for running + queued to get back after aborts",
    )
    stress_concurrency: int = Field(
        80, ge=1, le=MAX_CONCURRENCY, description="sessions of the corruption suite's load"
    )
    stress_duration_s: float = Field(
        120.0, ge=0.0, le=86400.0, description="seconds of soak load (and an A/B block)"
    )
    # How long the deploy's (and rollback's) gate runs each flag-aware suite (the corruption,
    # abort-cascade and sweep suites a flag change calls for; smoke sends its request count).
    # `deploy --canary-duration` overrides it for one deploy; a runbook's deploy, whose command
    # text is the box's, gets it from the profile.
    gate_duration_s: float = Field(
        20.0,
        ge=1.0,
        le=3600.0,
        description="seconds of each flag-aware suite in the deploy's canary gate",
    )
    sweep_concurrency: Concurrencies = Field(
        (32, 48, 56, 57, 64, 72, 80, 88, 96),
        max_length=64,
        description="the sweep's concurrency staircase",
    )
    # Seconds at each level of a `canary --suite sweep` (its first 30 % is warm-up; `--duration`
    # splits its seconds over the levels instead, as the deploy's gate does): long enough for
    # several decode metric reports and a steady window on the deployment's step time.
    sweep_level_s: float = Field(
        6.0, ge=1.0, le=3600.0, description="seconds of each sweep level (30 % warm-up)"
    )
    sweep_throughput_tolerance_pct: float = Field(
        5.0, ge=0.0, le=100.0, description="distance from the throughput law a level may fall"
    )
    sawtooth_max_drop_pct: float = Field(
        5.0, ge=0.0, le=100.0, description="drop past a CUDA-graph bucket that is a sawtooth"
    )
    # Hang watchdog: a stream silent this long is stalled; no token anywhere this long is a
    # server-wide freeze (and the floor of the metrics-side no-progress window). 2 s keeps
    # detection under 3 s, far below SGLang's 300 s timeouts.
    stall_s: float = Field(
        2.0, ge=0.1, le=600.0, description="seconds a stream may be silent before it is stalled"
    )
    freeze_s: float = Field(
        2.0, ge=0.1, le=600.0, description="seconds without a token anywhere that are a freeze"
    )
    # Run the suites with chat_template_kwargs.thinking (needs model.reasoning_parser);
    # tool-call requests get thinking_budget_tokens more max_tokens for the reasoning.
    thinking: bool = Field(False, description="suites ask for reasoning (chat_template_kwargs)")
    thinking_budget_tokens: int = Field(
        1024, ge=1, le=131072, description="extra max_tokens of a request when thinking"
    )
    # The suites' tool-call requests (a nonce echoed in the call's arguments). A model that
    # cannot copy text from its prompt (the tiny CPU model) declares false: the suites send
    # none, corruption answers INCONCLUSIVE, and every verdict says the checks were off.
    tool_calls: bool = Field(True, description="suites send tool-call requests")


# The profile's `probe` section: how the deploy's end-to-end probe checks the deployed model
# (orchestrate/probe.py). Declared like `CanaryThresholds`.
class ProbeSettings(Settings):
    # What the deployed model can do, declared: DSV4 spells a forced call; a model that cannot
    # satisfy the call grammar (the tiny CPU model, docs/twin.md) says `auto`, one that calls no
    # tools `off`. A deploy whose probe skipped or did not force the call says so.
    tool_call: ProbeToolCall = Field(
        "required",
        description="the probe's tool call: forced (required), offered (auto) or not sent (off)",
    )
