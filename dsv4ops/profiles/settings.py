"""Declared settings: a profile section whose keys are each declared once, as one field of a
frozen dataclass, and everything else derived from that declaration (as pre-commit derives its
config checks from one schema).

One line declares a setting: its name (the field's), its type (the annotation), its default,
bounds and doc (`setting(...)`). From the dataclass come

* the section's schema (`profiles/schema.py`: `section_schema`), so the loader validates it;
* the section's value on `Profile` (`from_values`: the dataclass itself, built by name);
* its value from a journal record (`from_record`: a redacted '***' keeps the default);
* the profile reference's table and JSON Schema (through the section's schema:
  `profiles/reference.py`, `profiles/json_schema.py`);
* in the canary, the thresholds (`canary.verdict.Thresholds` derives from `CanaryThresholds`).

To add a setting to a declared section, add one field; to add a declared section, declare its
dataclass like `CanaryThresholds` (profiles/model.py), give it a key in `PROFILE_SCHEMA`
(`section_schema(TheClass)`), a field on `Profile` and a `from_values` line in build.py.
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

# The annotation of a declared field -> the schema kind that validates it (profiles/schema.py).
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


def from_record(cls: type[S], record: Mapping[str, object] | None) -> S:
    """The section as a journal recorded it: a value that is missing, null or not of the
    declared type (an older record may hold a redacted '***' where a number belongs) keeps the
    default; keys the declaration does not know are ignored."""
    changes: dict[str, object] = {}
    for d in declared(cls):
        value = (record or {}).get(d.name)
        if value is not None and _fits(d.kind, value):
            changes[d.name] = _frozen(value)
            if d.kind == "float" and isinstance(value, int):  # a YAML 2 where 2.0 is meant
                changes[d.name] = float(value)
    return dataclasses.replace(cls(), **changes)


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
