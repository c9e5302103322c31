"""The profile's checks before its rules: unknown keys (per file, so the error names the file
that has the typo) and each key of the merged document validated by its field of the pydantic
models (profiles/profile_spec.py), every problem named `file:line: key: why`."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from annotated_types import MaxLen
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.excerpt import excerpt, key_excerpt
from dsv4ops.profiles.problems import Problems, strict, unknown_key
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.schema import adapter, describe, json_kind, section_of, value_schema


def check_unknown_keys(
    data: Mapping[str, object],
    model: type[BaseModel],
    file: str,
    lines: LineInfo,
    prefix: str = "",
    sink: Problems | None = None,
) -> None:
    """Report keys not in the model (with a did-you-mean hint) and sections that are not
    mappings. Without a sink, raise ProfileError for the first one."""
    sink = sink if sink is not None else strict()
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        info = model.model_fields.get(key) if isinstance(key, str) else None
        if info is None:
            # A key can be anything YAML allows (16 KB of text): show a bounded part.
            why, hint = unknown_key(str(key), model.model_fields)
            sink.report(
                ProfileError(
                    why,
                    path=file,
                    line=lines.get(path),
                    key=key_excerpt(path, 120),
                    hint=hint,
                )
            )
            continue
        section = section_of(info)
        if section is not None:
            if value is None:
                continue
            if not isinstance(value, dict):
                sink.report(
                    ProfileError(
                        "expected a mapping (a section of keys)",
                        path=file,
                        line=lines.get(path),
                        key=path,
                    )
                )
                sink.mark_unusable(path)
                continue
            check_unknown_keys(value, section, file, lines, path, sink)


def normalize(
    data: JSONObject,
    model: type[BaseModel],
    prov: Provenance,
    prefix: str = "",
    sink: Problems | None = None,
) -> dict[str, object]:
    """Every key of `model`, each value validated by its field (a missing one at its default).

    Without a sink, raise ProfileError for the first bad value. With a collecting sink, report
    each one, mark it unusable and put a placeholder (its default, or an empty value) in its
    place, so the model can still be assembled and the rules run on the rest.
    """
    out: dict[str, object] = {}
    for key, info in model.model_fields.items():
        path = f"{prefix}.{key}" if prefix else key
        section = section_of(info)
        if section is not None:
            value = data.get(key)
            if sink is not None and value is not None and not isinstance(value, dict):
                # Reported per file by check_unknown_keys ('expected a mapping').
                sink.mark_unusable(path)
                out[key] = normalize({}, section, prov, path, Problems(collect=True))
                continue
            out[key] = normalize(value or {}, section, prov, path, sink)
            continue
        try:
            out[key] = _value(data, key, info, prov, path)
        except ProfileError as exc:
            if sink is None:
                raise
            sink.report(exc)
            sink.mark_unusable(path)
            out[key] = placeholder(info)
    return out


def _value(
    data: Mapping[str, object], key: str, info: FieldInfo, prov: Provenance, path: str
) -> object:
    """One key's value: null and "" read as the loader always read them, the rest validated by
    the field's declared type, bounds and checks."""
    schema, nullable = value_schema(info)
    kind = json_kind(schema)
    if key not in data:
        if info.is_required():
            raise prov.error(path, missing(info))
        return _default(info)
    value = data[key]
    if value is None or value == "" and kind != "str":
        if nullable:
            return None
        if value == "" or info.is_required():
            raise prov.error(path, expected(value, info, key))
        return _default(info)
    # A nullable text that may be empty (no minLength: no choices, not a name) reads "" as null.
    if value == "" and nullable and not schema.get("enum") and "minLength" not in schema:
        return None
    try:
        return _adapter(info).validate_python(value)
    except ValidationError as exc:
        why, at = value_problem(exc.errors(include_url=False), value, info, key)
    raise prov.error(path + at, why)


def _adapter(info: FieldInfo, *, bounded: bool = True) -> TypeAdapter[object]:
    """The field's type, bounds and checks (without `bounded`: its length unbounded)."""
    marks = (m for m in info.metadata if bounded or not isinstance(m, MaxLen))
    return adapter(info.annotation, tuple(marks))


# Problems of a value of the right type (its bounds, its length, its text); any other error is
# a value of the wrong type, named as a whole.
_VALUE_ERRORS = frozenset(
    {"dsv4ops", "too_long", "finite_number", "greater_than_equal", "less_than_equal"}
)


def value_problem(
    errors: list[ErrorDetails], value: object, info: FieldInfo, key: str
) -> tuple[str, str]:
    """Why a key's value is refused, in the words of its field (`describe`: type, bounds,
    choices), and where in the value (an item's `[i]` or `.NAME`, "" for the whole value): the
    one translation of pydantic's errors for the profile and targets.yaml. It names the first
    problem the hand-written checks named: the type, then the length, then an item. `key` is the
    name the value sits under (a secret-named key hides it)."""
    if any(e["type"] == "too_long" for e in errors):
        # pydantic stops at the length; a list of the wrong items is named as such first.
        try:
            _adapter(info, bounded=False).validate_python(value)
        except ValidationError as exc:
            errors = [*exc.errors(include_url=False), *errors]
    if any(e["type"] not in _VALUE_ERRORS for e in errors):
        return expected(value, info, key), ""
    too_long = [e for e in errors if e["type"] == "too_long"]
    if too_long:
        ctx = too_long[0].get("ctx") or {}
        return f"{ctx['actual_length']} items; at most {ctx['max_length']} are allowed here", ""
    err = errors[0]
    at = _suffix(err["loc"])
    if err["type"] == "dsv4ops":
        return str((err.get("ctx") or {})["why"]), at
    if err["type"] == "finite_number":
        return f"expected a finite number ({describe(info)}), got {err['input']!r}", at
    return f"expected {describe(info)}, got {excerpt(err['input'])}", at


def missing(info: FieldInfo) -> str:
    return f"missing required key; expected {describe(info)}"


def expected(value: object, info: FieldInfo, key: str) -> str:
    """A value of the wrong type, named as a whole (under a secret-named `key`, hidden)."""
    return f"expected {describe(info)}, got {excerpt(value, key=key)}"


def _suffix(loc: tuple[int | str, ...]) -> str:
    """Where in a value an error is: an item ([i]), a mapping's value (.NAME); a mapping's key
    is named by the mapping."""
    if loc and loc[-1] == "[key]":
        return ""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("list", "spec"):  # the tags of a bucket list or spec
            out += f".{part}"
    return out


_EMPTY: dict[str, object] = {
    "str": "",
    "int": 0,
    "float": 0.0,
    "bool": False,
    "onoff": False,
    "int_list": [],
    "str_list": [],
    "str_map": {},
    "buckets": [],
}


def placeholder(info: FieldInfo) -> object:
    """A well-typed stand-in for a value that failed its check (never rendered: it is unusable)."""
    default = _default(info)
    return default if default is not None else copy.copy(_EMPTY[json_kind(value_schema(info)[0])])


def _default(info: FieldInfo) -> object:
    return None if info.is_required() else info.get_default(call_default_factory=True)
