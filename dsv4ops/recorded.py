"""The one reader of a section of a recorded profile: a journal's `begin` record holds the
resolved profile (`profile.content`, `Profile.to_dict()`) and its flags (`profile.flags`), a
`Deployment` carries them as a `RecordedProfile`, and reads each section it needs back through
its declaration (dsv4ops/settings.py; the flags: `RecordedFlags`) here, once.

A setting the record lacks is at its default (what the release that wrote it ran); a redacted
'***' of a release before 15ec807 is not known and reads the same way; any other value that does
not fit raises RecordedSettingError naming the operation, the key, the value and the way back
(docs/deploy.md, "Recorded settings"). It is never replaced by a default without a word.

Also the fields of a recorded component (`RecordedFields`, its stop grace `recorded_grace`),
read by the same rule. Imports only `errors`, `secrets`, `routerkind`, `settings`, `apikey` and
`timings`. Pure; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from pydantic import Field

from dsv4ops.apikey import ApiKeyRef
from dsv4ops.errors import RecordedSettingError
from dsv4ops.routerkind import RouterKind
from dsv4ops.secrets import REDACTED
from dsv4ops.settings import IntTuple, Settings, UnfitValue
from dsv4ops.timings import STOP_GRACE_MAX_S, STOP_GRACE_S

Section = TypeVar("Section", bound=Settings)


class RecordedModel(Settings):
    """What a deployment reads of its recorded `model` section (the parsers are in its argv):
    the name requests carry, by `deployment.served_model_name`'s rule."""

    path: str | None = Field(None, description="the model's path (`model.path`)")
    served_name: str | None = Field(None, description="`--served-model-name` (`model.served_name`)")


class RecordedRouter(Settings):
    """What a deployment reads of its recorded `router` section (its flags are in its argv)."""

    # Records written before the choice existed ran sglang-router, the only router then. Not
    # strict: the record holds the kind's name, which names the member.
    kind: RouterKind = Field(
        RouterKind.SGLANG_ROUTER,
        strict=False,
        description="which router fronts the pair (`router.kind`)",
    )


class RecordedFlags(Settings):
    """The flags a deployment records beside its profile (`profile.flags` of a begin record)
    that are not on/off: the decode's buckets the canary and watch judge by, and what the
    deploy's canary gate compares with the deployed one's. The on/off flags: `switches`.
    Rendered from a profile already checked: read by type, with no bounds of their own."""

    decode_buckets: IntTuple = Field(
        (), description="the decode's CUDA-graph batch sizes (`--cuda-graph-bs-decode`)"
    )
    decode_context_length: int | None = Field(
        None, description="the decode's `--context-length` (None: the model's)"
    )


@dataclass(frozen=True)
class RecordedProfile:
    """What a deployment carries of its profile beside its commands: the resolved profile
    (`content`: `Profile.to_dict()`) and its `flags`, as rendered or as a journal recorded them.
    The journal stores them as they are (a rollback records byte for byte what it read); they
    are read only through `Deployment`, by their declarations (`read`), never as a dict."""

    content: Mapping[str, object] | None = None
    flags: Mapping[str, object] | None = None

    def record(self) -> tuple[dict[str, object] | None, dict[str, object]]:
        """(content, flags) as the journal's begin record stores them."""
        content = dict(self.content) if self.content is not None else None
        return content, dict(self.flags or {})

    def read(self, name: str, cls: type[Section], *, op: str | None, profile: str) -> Section:
        """Section `name` of the recorded profile (`flags`: the recorded flags) through `cls`.
        `op`: the journal operation it was recorded by; `profile`: the profile to name in the
        way back (its path, else its name). RecordedSettingError for a value that does not
        fit."""
        try:
            if name == "flags":
                _switches(self.flags)  # a bad on/off flag is refused with the rest of them
                return cls.from_record(self.flags)
            if self.content is None:
                return cls.from_record(None)
            if not isinstance(self.content, Mapping):
                raise UnfitValue("", self.content, "a mapping of sections")
            return cls.from_record(self.content.get(name), redacted=REDACTED)
        except UnfitValue as exc:
            raise _unfit(name, exc, op, profile) from None

    def switches(self, *, op: str | None, profile: str) -> dict[str, bool | None]:
        """The on/off flags recorded (what a gate compares; `read` names the arguments): flag
        -> true or false (None: recorded as not known; a flag recorded before it existed is
        absent). RecordedSettingError for a value that is neither."""
        try:
            return _switches(self.flags)
        except UnfitValue as exc:
            raise _unfit("flags", exc, op, profile) from None


# The recorded flags that are not on/off: RecordedFlags's, and the bucket spec as written (what
# `profile show` says; never judged). Every other one is an on/off flag, declared a layer up
# (profiles/profile_spec.py SWITCHES), and recorded as its value: true or false.
_NOT_SWITCHES = frozenset({*RecordedFlags.model_fields, "decode_buckets_spec"})


def _switches(flags: Mapping[str, object] | None) -> dict[str, bool | None]:
    if flags is None:
        return {}
    if not isinstance(flags, Mapping):
        raise UnfitValue("", flags, "a mapping of settings")
    out: dict[str, bool | None] = {}
    for key, value in flags.items():
        if key in _NOT_SWITCHES:
            continue
        if value is not None and not isinstance(value, bool):
            raise UnfitValue(str(key), value, "true or false")
        out[str(key)] = value
    return out


def _unfit(name: str, exc: UnfitValue, op: str | None, profile: str) -> RecordedSettingError:
    where = "profile.flags" if name == "flags" else f"profile.content.{name}"
    key = f"{name}.{exc.name}" if exc.name else name
    return RecordedSettingError(
        op, key, exc.value, exc.expected, hint=_way_back(name, where, op, profile)
    )


def _way_back(section: str, where: str, op: str | None, profile: str) -> str:
    judge = (
        f"judge by the profile instead: `dsv4ops canary --profile {profile} ...`; or "
        if section in ("canary", "flags")
        else ""
    )
    return (
        f"mend `{where}` of the begin record of {op} where it was edited "
        f'(docs/deploy.md, "Recorded settings"); or {judge}redeploy the profile, which records '
        f"it afresh: `dsv4ops deploy {profile} --target TARGET`"
    )


_MISSING = object()
_SCALAR = (str, int, float, bool)


class RecordedFields:
    """The fields of one recorded component (`Component.to_record`), each read by its type: a
    field a release did not record yet is at what that release ran (the caller's default); a
    value no release writes raises RecordedSettingError naming the operation and
    `components.<name>.<key>`, never a default."""

    def __init__(self, data: Mapping[str, object], op: str | None, name: str) -> None:
        self._data, self.op, self.name = data, op, name

    @classmethod
    def of(cls, data: object, op: str | None) -> RecordedFields:
        name = data.get("name") if isinstance(data, Mapping) else None
        if not isinstance(data, Mapping) or not isinstance(name, str) or not name:
            raise RecordedSettingError(
                op, "components[]", data, "a component (a mapping with its name)", hint=_redeploy()
            )
        return cls(data, op, name)

    def unfit(self, key: str, expected: str) -> RecordedSettingError:
        return RecordedSettingError(
            self.op,
            f"components.{self.name}.{key}",
            self._data.get(key),
            expected,
            hint=mend_component(self.op, self.name, key),
        )

    def raw(self, key: str) -> object:
        """The value as recorded; `_MISSING` when the record has no such key."""
        return self._data.get(key, _MISSING)

    def integer(self, key: str, default: int) -> int:
        value = self._data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.unfit(key, "a port number (an integer)")
        return value

    def optional_integer(self, key: str, default: int | None) -> int | None:
        if key not in self._data:
            return default
        return None if self._data[key] is None else self.integer(key, 0)

    def integers(self, key: str) -> tuple[int, ...]:
        value = self._data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list | tuple) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in value
        ):
            raise self.unfit(key, "a list of port numbers")
        return tuple(value)

    def text(self, key: str, default: str) -> str:
        value = self._data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.unfit(key, "a string")
        return value

    def argv(self) -> tuple[str, ...]:
        value = self._data.get("argv")
        if not isinstance(value, list | tuple) or not all(isinstance(a, str) for a in value):
            raise self.unfit("argv", "a command line (a list of strings)")
        return tuple(value)

    def env(self) -> dict[str, str]:
        value = self._data.get("env")
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(
            isinstance(v, _SCALAR) for v in value.values()
        ):
            raise self.unfit("env", "a mapping of environment variables to values")
        return {str(k): str(v) for k, v in value.items()}

    def key_from(self) -> ApiKeyRef | None:
        """Where the router's key lives (None: recorded without one)."""
        value = self._data.get("key_from")
        if value is None:
            return None
        ref = ApiKeyRef.from_record(value)
        if ref is None:
            raise self.unfit("key_from", "where the key lives (its env or file)")
        return ref


def mend_component(op: str | None, name: str, key: str) -> str:
    """The way back from a recorded component field that does not fit."""
    return (
        f"mend `{key}` of the {name} in `components` of the begin record of {op} where it was "
        f"edited; or {_redeploy()}"
    )


def _redeploy() -> str:
    return "redeploy the profile, which records it afresh: `dsv4ops deploy PROFILE --target TARGET`"


def recorded_grace(value: object, *, where: RecordedFields) -> float:
    """A component's recorded stop grace (`value`: `_MISSING` when the record has none). A
    record from before the setting has none and was deployed with the default, which is what
    stopping it then gave it; any value but a number of seconds in (0, STOP_GRACE_MAX_S] raises
    RecordedSettingError naming the key: a stop is never timed by a guess."""
    if value is _MISSING:
        return STOP_GRACE_S
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= STOP_GRACE_MAX_S
    ):
        return float(value)
    raise where.unfit("stop_grace_s", f"a number of seconds above 0, at most {STOP_GRACE_MAX_S:g}")
