"""Tool-call checks: reassemble streamed `tool_calls` deltas, validate JSON, schema and nonce.

The failure shapes come from real incidents: `name: null`, duplicated/concatenated `arguments`
(sglang#23071), invalid JSON under streaming (vllm#38946), and in the seeds a multi-stream-overlap
race that, through SGLang 0.5.23's `deepseekv4` parser (which only ever emits complete calls with
json.dumps arguments), showed up as missing calls, one request's values in another's call
(cross-talk) and DSML markup in `content`. Every problem is reported as a
`ToolProblem(kind, detail)` so a suite can count them by kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Problem kinds (stable strings: they appear in reports and verdict reasons).
MISSING_CALL = "missing_tool_call"
MISSING_NAME = "missing_name"
NAME_CHANGED = "name_changed"
ID_CHANGED = "id_changed"
UNKNOWN_TOOL = "unknown_tool"
INVALID_JSON = "invalid_json"
SCHEMA = "schema_violation"
NONCE_MISMATCH = "nonce_mismatch"
CROSS_TALK = "cross_talk"
MARKUP_IN_CONTENT = "markup_in_content"
# Not corruption: the call did not fit in max_tokens (e.g. reasoning used the budget).
CUT_BY_MAX_TOKENS = "cut_by_max_tokens"

# Tool-call markup that must never leak into `content` when the parser works: DSV4's DSML
# (`<｜DSML｜tool_calls>`, `<｜DSML｜invoke name=…>`, `</｜DSML｜parameter>`; U+FF5C bars, ASCII
# bars accepted too), older DeepSeek tokens and generic JSON/XML tool-call formats.
_MARKUP = re.compile(
    r"[｜|]DSML[｜|]|<\|?tool[▁_ ]?calls?|<tool_call>|<｜tool|\"arguments\"\s*:", re.IGNORECASE
)
# A canary nonce (workload.new_nonce) anywhere in the arguments, to spot other requests' values.
_NONCE = re.compile(r"(?<![0-9a-f])[0-9a-f]{12}(?![0-9a-f])")


def has_markup(text: str) -> bool:
    return bool(text) and _MARKUP.search(text) is not None


@dataclass
class ToolCall:
    """One tool call, joined from its stream deltas."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    problems: list[ToolProblem] = field(default_factory=list)


@dataclass(frozen=True)
class ToolProblem:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def assemble(deltas: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """Join `delta.tool_calls` entries by `index`; id and name must be set once and not change."""
    calls: dict[int, ToolCall] = {}
    for d in deltas:
        index = d.get("index")
        if not isinstance(index, int):
            index = 0
        call = calls.setdefault(index, ToolCall(index=index))
        new_id = d.get("id")
        if new_id:
            if call.id is None:
                call.id = new_id
            elif new_id != call.id:
                call.problems.append(ToolProblem(ID_CHANGED, f"call {index}: {call.id!r} then {new_id!r}"))
        fn = d.get("function") or {}
        name = fn.get("name")
        if name:
            if call.name is None:
                call.name = name
            elif name != call.name:
                call.problems.append(ToolProblem(NAME_CHANGED, f"call {index}: {call.name!r} then {name!r}"))
            elif call.arguments:
                # the same name sent again after arguments began: the duplicated-call shape
                call.problems.append(ToolProblem(NAME_CHANGED, f"call {index}: name {name!r} repeated"))
        args = fn.get("arguments")
        if isinstance(args, str):
            call.arguments += args
    return [calls[i] for i in sorted(calls)]


def check_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Mapping[str, Any]],
    *,
    expected_nonce: str | None,
    known_nonces: Mapping[str, str] | None = None,
    content: str = "",
    require_call: bool = True,
    finish_reason: str | None = None,
) -> list[ToolProblem]:
    """Validate joined calls against the declared tools (name → JSON schema of the parameters).

    `expected_nonce`: the value this request's call must carry in its `nonce` argument.
    `known_nonces`: every nonce issued in the run (nonce → request id): another request's nonce
    anywhere in the arguments is cross-talk, not plain corruption.
    """
    problems: list[ToolProblem] = []
    if has_markup(content):
        problems.append(ToolProblem(MARKUP_IN_CONTENT, f"content has tool-call markup: {content[:80]!r}"))
    if not calls:
        if require_call and finish_reason == "length":
            problems.append(ToolProblem(CUT_BY_MAX_TOKENS, "no tool call: the output reached "
                                        "max_tokens first (finish_reason length)"))
        elif require_call:
            problems.append(ToolProblem(MISSING_CALL, "no tool call in the response "
                                        f"(finish_reason {finish_reason!r})"))
        return problems
    for call in calls:
        problems.extend(call.problems)
        problems.extend(_check_one(call, tools, expected_nonce, known_nonces or {}))
    return problems


def _check_one(call: ToolCall, tools: Mapping[str, Mapping[str, Any]], expected_nonce: str | None,
               known_nonces: Mapping[str, str]) -> list[ToolProblem]:
    if not call.name:
        return [ToolProblem(MISSING_NAME, f"call {call.index} has no function name")]
    schema = tools.get(call.name)
    if schema is None:
        return [ToolProblem(UNKNOWN_TOOL, f"call {call.index} names undeclared tool {call.name!r}")]
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return [ToolProblem(INVALID_JSON, f"{call.name}: {exc.msg} in {call.arguments[:120]!r}")]
    if expected_nonce is not None:
        for found in _NONCE.findall(call.arguments):
            owner = known_nonces.get(found)
            if found != expected_nonce and owner is not None:
                return [ToolProblem(CROSS_TALK, f"{call.name}: value with nonce {found!r} of "
                                    f"request {owner} in {call.arguments[:120]!r}")]
    errors = validate_schema(args, schema)
    if errors:
        return [ToolProblem(SCHEMA, f"{call.name}: {errors[0]}")]
    if expected_nonce is not None and isinstance(args, dict) and "nonce" in args \
            and args["nonce"] != expected_nonce:
        return [ToolProblem(NONCE_MISMATCH,
                            f"{call.name}: nonce {args['nonce']!r}, expected {expected_nonce!r}")]
    return []


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def validate_schema(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Check `value` against a JSON-Schema subset (type, properties, required,
    additionalProperties, items, enum, const, minLength, maxLength, pattern, minimum, maximum).

    Returns error strings (empty when valid). Tool schemas in practice use only this subset.
    """
    errors: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, n) for n in names):
            return [f"{path}: expected {'/'.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != {schema['const']!r}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            errors.append(f"{path}: {value!r} does not match {schema['pattern']!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: missing required {key!r}")
        for key, item in value.items():
            if key in props:
                errors.extend(validate_schema(item, props[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected property {key!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            errors.extend(validate_schema(item, schema["items"], f"{path}[{i}]"))
    return errors


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, (object,)))
