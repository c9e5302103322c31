"""What a valid value of a profile key looks like: the types the profile's pydantic models
(profiles/profile_spec.py) declare their keys with (`Kind`, the kinds of text, on/off, argv
lists, env maps), the checks every string gets (`text_problem`), the bounds and choices, and the
view of a model's key the error texts read (`describe`). Each type's JSON Schema is
what an editor should take (`Kind`), so the shipped schema is the models' (json_schema.py).
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Annotated, TypedDict, cast

from annotated_types import Ge, Le
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from dsv4ops.profiles import _flag_tables
from dsv4ops.profiles.buckets import MAX_BATCH_SIZE, SPEC_HELP, SPEC_PATTERNS
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.routers import any_policy

# Values SGLang 0.5.23's parser accepts (reference §1.1-1.2, dumped from the live parser).
TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp")
KV_CACHE_DTYPES = (
    "auto",
    "fp8_e5m2",
    "fp8_e4m3",
    "mxfp8",
    "bf16",
    "bfloat16",
    "nvfp4",
    "fp4_mx_block16",
)
# What either router takes; rules.rule_router_kind names the one that lacks a value.
ROUTER_POLICIES = any_policy("policy")
REASONING_PARSERS: tuple[str, ...] = _flag_tables.SGLANG_SERVER_TABLE["--reasoning-parser"][2] or ()

MAX_GPU_ID = 255
GpuIds = list[Annotated[int, Ge(0), Le(MAX_GPU_ID)]]
MAX_RUNNING_REQUESTS = MAX_BATCH_SIZE


# Bounds every value gets (docs/profiles.md "What is refused"): far above any real profile, far
# below what would make a check, a message or a command line unbounded.
MAX_STRING_CHARS = 16 * 1024  # one argv word or env value; Linux allows 128 KiB (MAX_ARG_STRLEN)
MAX_ITEMS = 256  # items of a list or NAME: value mapping (extra_args, env, ...)

# What a string must look like (Kind.text), beyond "no control characters", which every string
# except free text is checked for (a NUL cannot be passed to execve; a newline or an escape
# sequence in an argv word or env value breaks the printed command, the journal and the terminal).
TEXT_HELP = {
    "free": "text (newlines and tabs allowed)",
    "argv": "text without control characters",
    "nonempty": "a non-empty string without control characters",
    "name": "a name: visible characters only, no spaces",
    "endpoint": "a URL path starting with '/', without spaces",
}


_KIND_HELP = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "onoff": "on or off",
    "int_list": "a list of integers",
    "str_list": "a list of strings, e.g. ['--flag', 'value']",
    "str_map": "a mapping of NAME: value strings",
    "buckets": SPEC_HELP,
}


def describe(info: FieldInfo) -> str:
    """What a valid value of a key looks like, for error messages."""
    value, nullable = value_schema(info)
    choices = value.get("enum")
    if choices:
        shown = choices if len(choices) <= 10 else [*choices[:8], f"... ({len(choices)} in all)"]
        text = "one of " + ", ".join(shown)
    else:
        kind = json_kind(value)
        text = _KIND_HELP[kind]
        if kind == "str_list" and "anyOf" not in value.get("items", {}):
            # the argv example fits argv lists (their items take numbers too), not a URL list
            text = "a list of strings" + (f" ({info.description})" if info.description else "")
        bounds = _bounds(value.get("items", value))
        if bounds:
            text += f", each {bounds}" if kind == "int_list" else f" {bounds}"
        if kind == "int_list" and "maxItems" in value:
            text += f", at most {value['maxItems']}"
    return text + (" (or null)" if nullable else "")


def _bounds(numbers: JSONProp) -> str:
    low, high = numbers.get("minimum"), numbers.get("maximum")
    if low is not None and high is not None:
        return f"from {low:g} to {high:g}"
    if low is not None:
        return f">= {low:g}"
    return f"<= {high:g}" if high is not None else ""


# The words an on/off key takes, in any case (json_schema.py spells them out for editors).
ON_WORDS = frozenset({"on", "true", "yes", "1"})
OFF_WORDS = frozenset({"off", "false", "no", "0"})

NONEMPTY_TEXT = ("nonempty", "name", "endpoint")


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
    if kind in NONEMPTY_TEXT and not text.strip():
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


@dataclass(frozen=True)
class Kind:
    """What a key's type reads as in the docs and errors (a _KIND_HELP key), its kind of text
    (a schema.TEXT_HELP key) and, for a string, the only values it takes. On a string it is also
    the check: one of the choices, then the text's (typecheck.text_problem)."""

    kind: str
    text: str = "argv"
    choices: tuple[str, ...] | None = None

    def __get_pydantic_core_schema__(
        self, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        schema = handler(source)
        if self.kind != "str":
            return schema
        return core_schema.no_info_after_validator_function(self._check, schema)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """What an editor checks: the spellings the loader takes, not only the model's type
        (on/off words, numbers in an argv, a bucket spec), each string's kind of text."""
        generated = handler(schema)
        if self.kind == "str" and self.choices is not None:
            return {"type": "string", "enum": list(self.choices)}
        if self.kind == "str":
            return dict(text_json_schema(self.text))
        if self.kind == "onoff":
            return {"anyOf": [{"type": "boolean"}, {"type": "string", "pattern": _onoff_pattern()}]}
        limit = generated.get("maxItems", generated.get("maxProperties", MAX_ITEMS))
        if self.kind == "str_list":
            # Numbers and booleans in an argv list are written as text (_argv).
            return {"type": "array", "items": _argv_scalar_schema(self.text), "maxItems": limit}
        if self.kind == "str_map":
            return {
                "type": "object",
                "propertyNames": text_json_schema(self.text),
                "additionalProperties": {
                    "anyOf": [_argv_scalar_schema(self.text), {"type": "null"}]
                },
                "maxProperties": limit,
            }
        if self.kind == "buckets":
            lists = next(s for s in generated["oneOf"] if s.get("type") == "array")
            spec = "|".join(p.removeprefix("^").removesuffix("$") for p in SPEC_PATTERNS)
            pattern = f"^\\s*({spec})\\s*$"
            return {"anyOf": [lists, {"type": "string", "pattern": pattern}]}
        return generated

    def _check(self, value: str) -> str:
        if self.choices is not None and value not in self.choices:
            raise PydanticCustomError("choice", "not one of the choices")
        found = text_problem(value, self.text)
        if found is not None:
            raise PydanticCustomError("dsv4ops", "{why}", {"why": found})
        return value


ArgvText = Annotated[str, Kind("str")]
FreeText = Annotated[str, Kind("str", "free")]
NonEmptyText = Annotated[str, Kind("str", "nonempty")]
NameText = Annotated[str, Kind("str", "name")]
EndpointText = Annotated[str, Kind("str", "endpoint")]


def _onoff(value: object) -> object:
    # YAML 1.1 reads bare on/off as booleans; the quoted words are taken in any case too.
    if isinstance(value, str) and value.lower() in ON_WORDS | OFF_WORDS:
        return value.lower() in ON_WORDS
    return value


def _argv_scalar(v: object) -> bool:
    """One obvious text form in an argv or env: a string, a bool, an integer or a finite number
    (a NaN or infinity is refused: no flag means it)."""
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, str | int)


def _argv(value: object) -> object:
    # Numbers in an argv list are fine ('--max-prefill-tokens', 16384); argv is strings.
    if isinstance(value, list) and all(_argv_scalar(v) for v in value):
        return [str(v) for v in value]
    return value


def _env(value: object) -> object:
    # Each value as text: numbers and booleans have one obvious spelling (true: "1"); any other
    # value is left to be refused.
    if not isinstance(value, dict):
        return value
    return {str(k): _env_str(v) for k, v in value.items()}


def _env_str(value: object) -> object:
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return ""
    return str(value) if _argv_scalar(value) else value


def _argv_scalar_schema(text: str) -> dict[str, object]:
    return {"anyOf": [text_json_schema(text), {"type": ["number", "boolean"]}]}


def _onoff_pattern() -> str:
    """on/off words in any case (ECMA-262 regexes have no (?i) flag)."""
    words = sorted(ON_WORDS | OFF_WORDS)
    spelled = ("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in w) for w in words)
    return "^(" + "|".join(spelled) + ")$"


OnOff = Annotated[bool, Kind("onoff"), BeforeValidator(_onoff)]
ArgvList = Annotated[list[ArgvText], Kind("str_list"), BeforeValidator(_argv)]
EnvMap = Annotated[dict[ArgvText, ArgvText], Kind("str_map"), BeforeValidator(_env)]


class Section(BaseModel):
    """A mapping of a profile or targets.yaml: frozen, unknown keys refused, no type coerced."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


def section_of(info: FieldInfo) -> type[BaseModel] | None:
    """The model of a key that is a section (a mapping of keys), else None."""
    kind = info.annotation
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def value_schema(info: FieldInfo) -> tuple[JSONProp, bool]:
    """A key's JSON Schema without its null alternative (the bounds and choices pydantic puts
    there, Kind's spelling of each kind), and whether it takes null: what the errors name."""
    return _value_schema(info.annotation, tuple(info.metadata))


@cache
def _value_schema(annotation: object, metadata: tuple[object, ...]) -> tuple[JSONProp, bool]:
    return json_value(cast(JSONProp, adapter(annotation, metadata).json_schema()))


@cache
def adapter(annotation: object, metadata: tuple[object, ...]) -> TypeAdapter[object]:
    """The validator of a key's type and its metadata (bounds, checks), strict as the models."""
    kind = Annotated[annotation, *metadata] if metadata else annotation
    return TypeAdapter(kind, config=ConfigDict(strict=True, allow_inf_nan=False))


class JSONProp(TypedDict, total=False):
    """What the error texts and docs/profiles.md's tables read of a JSON Schema."""

    type: str
    items: JSONProp
    anyOf: list[JSONProp]
    properties: dict[str, JSONProp]
    required: list[str]
    minimum: float
    maximum: float
    maxItems: int
    maxProperties: int
    enum: list[str]
    const: str
    pattern: str
    default: object
    description: str


def json_value(schema: JSONProp) -> tuple[JSONProp, bool]:
    """The JSON Schema of a value without its null alternative, and whether it takes null."""
    alternatives = schema.get("anyOf", [schema])
    values = [s for s in alternatives if s.get("type") != "null"]
    value = values[0] if len(values) == 1 else JSONProp(anyOf=values)
    return value, len(values) < len(alternatives)


# The JSON Schema's names of a model's types, in the docs' and errors' words (_KIND_HELP).
_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def json_kind(value: JSONProp) -> str:
    """The kind (a _KIND_HELP key) of a value's JSON Schema (without its null alternative)."""
    if "anyOf" in value:  # Kind's spellings: true or an on/off word, a list or a spec
        types = [s.get("type") for s in value["anyOf"]]
        return "onoff" if "boolean" in types else "buckets"
    if value.get("type") == "array":
        return "int_list" if value["items"].get("type") == "integer" else "str_list"
    return "str_map" if value.get("type") == "object" else _JSON_TYPES[value["type"]]
