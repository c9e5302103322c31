"""Schema checks: unknown keys (per file) and types/required keys/defaults (merged document)."""

from __future__ import annotations

import difflib
import math
import unicodedata
from collections.abc import Mapping, Sized

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.excerpt import excerpt, key_excerpt
from dsv4ops.profiles.problems import Problems, strict
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.schema import MAX_ITEMS, MAX_STRING_CHARS, TEXT_HELP, Field, Schema, describe

# The words an on/off key takes, in any case (json_schema.py spells them out for editors).
ON_WORDS = frozenset({"on", "true", "yes", "1"})
OFF_WORDS = frozenset({"off", "false", "no", "0"})


def check_unknown_keys(
    data: Mapping[str, object],
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
            # A key can be anything YAML allows (16 KB of text): match and show a bounded part.
            close = difflib.get_close_matches(str(key)[:64], list(schema), n=1)
            hint = f"did you mean '{close[0]}'?" if close else None
            valid = ", ".join(schema)
            sink.report(
                ProfileError(
                    f"unknown key; valid keys here: {valid}",
                    path=file,
                    line=lines.get(path),
                    key=key_excerpt(path, 120),
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
    data: JSONObject,
    schema: Schema,
    prov: Provenance,
    prefix: str = "",
    sink: Problems | None = None,
) -> JSONObject:
    """Return a copy with every schema key present: values type-checked, defaults filled in.

    Without a sink, raise ProfileError for the first bad value. With a collecting sink, report
    each one, mark it unusable and put a placeholder (its default, or an empty value) in its place.
    """
    out: dict[str, object] = {}
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


def placeholder(spec: Field) -> object:
    """A well-typed stand-in for a value that failed its check (never rendered: it is unusable)."""
    return _copy(spec.default) if spec.default is not None else _copy(_EMPTY[spec.kind])


def placeholders(schema: Schema) -> dict[str, object]:
    return {
        key: placeholders(spec) if isinstance(spec, dict) else placeholder(spec)
        for key, spec in schema.items()
    }


def _copy(value: object) -> object:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def coerce(value: object, spec: Field, prov: Provenance, path: str) -> object:
    """Check one value against its field; return the normalized value."""

    def bad() -> ProfileError:
        shown = excerpt(value, key=path.rsplit(".", 1)[-1])
        return prov.error(path, f"expected {describe(spec)}, got {shown}")

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
        if value == "" and spec.nullable and spec.text not in _NONEMPTY_TEXT:
            return None
        check_text(value, spec, prov, path)
        return value
    if kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad()
        if kind == "int" and not isinstance(value, int):
            raise bad()
        _check_number(value, spec, prov, path)
        if kind == "int":
            return value
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float, in a field without a maximum
            raise bad() from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if kind == "onoff":
        # YAML 1.1 reads bare on/off as booleans; accept those and the quoted strings.
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ON_WORDS | OFF_WORDS:
            return value.lower() in ON_WORDS
        raise bad()
    if kind in ("int_list", "buckets") and isinstance(value, list):
        if any(isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise bad()
        _check_items(value, spec, prov, path)
        if kind == "int_list":
            for i, v in enumerate(value):
                _check_number(v, spec, prov, f"{path}[{i}]")
        return list(value)
    if kind == "buckets" and isinstance(value, str):
        return value  # a spec: resolved (and bounded) by buckets.resolve_buckets
    if kind == "str_list":
        if not isinstance(value, list) or not all(_is_argv_scalar(v) for v in value):
            raise bad()
        _check_items(value, spec, prov, path)
        # Numbers in an argv list are fine ('--max-prefill-tokens', 16384); argv is strings.
        out = [str(v) for v in value]
        for i, v in enumerate(out):
            check_text(v, spec, prov, f"{path}[{i}]")
        return out
    if kind == "str_map":
        if not isinstance(value, dict) or not all(
            v is None or _is_argv_scalar(v) for v in value.values()
        ):
            raise bad()
        _check_items(value, spec, prov, path)
        out_map = {str(k): _env_str(v) for k, v in value.items()}
        for k, v in out_map.items():
            check_text(k, spec, prov, path)
            check_text(v, spec, prov, f"{path}.{k}")
        return out_map
    if kind in ("int_list", "buckets"):
        raise bad()
    raise AssertionError(f"unknown field kind {kind}")


_NONEMPTY_TEXT = ("nonempty", "name", "endpoint")


def _is_argv_scalar(v: object) -> bool:
    """A value that has one obvious text form in an argv or env: a string, a bool, an integer
    or a finite number (a NaN or infinity is refused: no flag means it)."""
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, str | int)


def _check_items(value: Sized, spec: Field, prov: Provenance, path: str) -> None:
    limit = spec.max_items if spec.max_items is not None else MAX_ITEMS
    if len(value) > limit:
        raise prov.error(path, f"{len(value)} items; at most {limit} are allowed here")


def _check_number(value: float, spec: Field, prov: Provenance, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise prov.error(path, f"expected a finite number ({describe(spec)}), got {value!r}")
    low = spec.minimum is not None and value < spec.minimum
    high = spec.maximum is not None and value > spec.maximum
    if low or high:
        raise prov.error(path, f"expected {describe(spec)}, got {excerpt(value)}")


def check_text(text: str, spec: Field, prov: Provenance, path: str) -> None:
    """Refuse a string that is too long, has control characters (except newlines and tabs in
    free text), or does not look like its field's kind of text (schema.TEXT_HELP)."""
    problem = text_problem(text, spec.text)
    if problem is not None:
        raise prov.error(path, problem)


def text_problem(text: str, kind: str) -> str | None:
    """What is wrong with a string of this kind of text (a schema.TEXT_HELP key), or None."""
    what = TEXT_HELP[kind]
    if len(text) > MAX_STRING_CHARS:
        return f"{len(text)} characters long; at most {MAX_STRING_CHARS} are allowed"
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Cc" and not (kind == "free" and ch in "\n\t"):
            return (
                f"contains the control character U+{ord(ch):04X} at position {i}; expected {what}"
            )
    if kind in _NONEMPTY_TEXT and not text.strip():
        return f"empty or blank; expected {what}"
    if kind == "name" or kind == "endpoint":
        for i, ch in enumerate(text):
            if ch.isspace() or unicodedata.category(ch) in _INVISIBLE:
                return (
                    f"contains the invisible or space character U+{ord(ch):04X} at position {i}; "
                    f"expected {what}"
                )
    if kind == "endpoint" and not text.startswith("/"):
        return f"expected {what}, got {excerpt(text)}"
    return None


# Unicode categories that print as nothing or as blank: format characters (zero-width space and
# joiners, bidi controls), separators.
_INVISIBLE = frozenset({"Cf", "Zs", "Zl", "Zp", "Co", "Cn"})


def _env_str(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


# Control characters (Unicode category Cc) refused in every string (text_problem); free
# text keeps newlines and tabs.
_CC = "\\u0000-\\u001f\\u007f-\\u009f"
_CC_BUT_NL_TAB = "\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f"
# The JSON Schema of each schema.TEXT_HELP kind (profiles/json_schema.py). "name" and "endpoint"
# text has no space either (text_problem also refuses invisible characters, which the schema
# approximates by whitespace).
TEXT_PATTERNS = {
    "free": f"^[^{_CC_BUT_NL_TAB}]*$",
    "argv": f"^[^{_CC}]*$",
    "nonempty": f"^[^{_CC}]*[^{_CC}\\s][^{_CC}]*$",
    "name": f"^[^{_CC}\\s]+$",
    "endpoint": f"^/[^{_CC}\\s]*$",
}


def text_json_schema(kind: str) -> dict[str, str | int]:
    """The JSON Schema of a string of this kind of text (what text_problem refuses, roughly)."""
    out: dict[str, str | int] = {"type": "string", "maxLength": MAX_STRING_CHARS}
    out["pattern"] = TEXT_PATTERNS[kind]
    if kind not in ("free", "argv"):
        out["minLength"] = 1
    return out
