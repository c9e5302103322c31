"""Schema checks: unknown keys (per file) and types/required keys/defaults (merged document)."""

from __future__ import annotations

import difflib
from typing import Any

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.profiles.problems import Problems, strict
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.schema import Field, Schema, describe

_ON = {"on", "true", "yes", "1"}
_OFF = {"off", "false", "no", "0"}


def check_unknown_keys(
    data: dict[str, Any],
    schema: Schema,
    file: str,
    lines: LineInfo,
    prefix: str = "",
    sink: Problems | None = None,
) -> None:
    """Report keys not in the schema (with a did-you-mean hint) and sections that are not
    mappings. Without a sink, raise ProfileError for the first one."""
    sink = sink if sink is not None else strict()
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        spec = schema.get(key) if isinstance(key, str) else None
        if spec is None:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f"did you mean '{close[0]}'?" if close else None
            valid = ", ".join(schema)
            sink.report(
                ProfileError(
                    f"unknown key; valid keys here: {valid}",
                    path=file,
                    line=lines.get(path),
                    key=path,
                    hint=hint,
                )
            )
            continue
        if isinstance(spec, dict):
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
            check_unknown_keys(value, spec, file, lines, path, sink)


def normalize(
    data: dict[str, Any],
    schema: Schema,
    prov: Provenance,
    prefix: str = "",
    sink: Problems | None = None,
) -> dict[str, Any]:
    """Return a copy with every schema key present: values type-checked, defaults filled in.

    Without a sink, raise ProfileError for the first bad value. With a collecting sink, report
    each one, mark it unusable and put a placeholder (its default, or an empty value) in its place.
    """
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(spec, dict):
            section = data.get(key)
            if sink is not None and section is not None and not isinstance(section, dict):
                # Reported per file by check_unknown_keys ('expected a mapping').
                sink.mark_unusable(path)
                out[key] = placeholders(spec)
                continue
            out[key] = normalize(section or {}, spec, prov, path, sink)
            continue
        try:
            if key not in data:
                if spec.required:
                    raise prov.error(path, f"missing required key; expected {describe(spec)}")
                out[key] = _copy(spec.default)
                continue
            out[key] = coerce(data[key], spec, prov, path)
        except ProfileError as exc:
            if sink is None:
                raise
            sink.report(exc)
            sink.mark_unusable(path)
            out[key] = placeholder(spec)
    return out


_EMPTY: dict[str, Any] = {
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


def placeholder(spec: Field) -> Any:
    """A well-typed stand-in for a value that failed its check (never rendered: it is unusable)."""
    return _copy(spec.default) if spec.default is not None else _copy(_EMPTY[spec.kind])


def placeholders(schema: Schema) -> dict[str, Any]:
    return {
        key: placeholders(spec) if isinstance(spec, dict) else placeholder(spec)
        for key, spec in schema.items()
    }


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def coerce(value: Any, spec: Field, prov: Provenance, path: str) -> Any:
    """Check one value against its field; return the normalized value."""

    def bad() -> ProfileError:
        return prov.error(path, f"expected {describe(spec)}, got {value!r}")

    if value is None or value == "" and spec.kind != "str":
        if spec.nullable:
            return None
        if value == "" or spec.required:
            raise bad()
        return _copy(spec.default)
    kind = spec.kind
    if kind == "str":
        if not isinstance(value, str):
            raise bad()
        if spec.choices and value not in spec.choices:
            raise bad()
        return value if value != "" or not spec.nullable else None
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return _check_min(value, spec, prov, path)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad()
        return _check_min(float(value), spec, prov, path)
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if kind == "onoff":
        # YAML 1.1 reads bare on/off as booleans; accept those and the quoted strings.
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _ON | _OFF:
            return value.lower() in _ON
        raise bad()
    if kind == "int_list":
        if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in value
        ):
            raise bad()
        return list(value)
    if kind == "str_list":
        if not isinstance(value, list) or any(
            isinstance(v, bool | dict | list) or v is None for v in value
        ):
            raise bad()
        # Numbers in an argv list are fine ('--max-prefill-tokens', 16384); argv is strings.
        return [str(v) for v in value]
    if kind == "str_map":
        if not isinstance(value, dict) or any(isinstance(v, dict | list) for v in value.values()):
            raise bad()
        return {str(k): _env_str(v) for k, v in value.items()}
    if kind == "buckets":
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            return list(value)
        raise bad()
    raise AssertionError(f"unknown field kind {kind}")


def _env_str(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


def _check_min(value: float, spec: Field, prov: Provenance, path: str) -> Any:
    if spec.minimum is not None and value < spec.minimum:
        raise prov.error(path, f"expected {describe(spec)}, got {value!r}")
    return value
