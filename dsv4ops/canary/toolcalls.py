"""Tool-call checks: reassemble streamed `tool_calls` deltas, validate JSON, schema and nonce.

The failure shapes come from real incidents: `name: null`, duplicated/concatenated `arguments`
(sglang#23071), invalid JSON under streaming (vllm#38946), and in the seeds a multi-stream-overlap
race that, through SGLang 0.5.23's `deepseekv4` parser (which only ever emits complete calls with
json.dumps arguments), showed up as missing calls, one request's values in another's call
(cross-talk) and DSML markup in `content`; and the streaming-only shapes of 2026 (a spurious
`arguments` wrapper key, calls lost from one delta, a stream that differs from the whole
answer: canary/streampair.py). Every problem is reported as a
`ToolProblem(kind, detail)` so a suite can count them by kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from dsv4ops.jsontypes import JSONValue

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
# Streaming-only shapes (sglang 2026): the arguments wrapped in a spurious "arguments" key
# (#38924); parallel calls lost when one delta carries several (#37634); the streamed answer
# differs from the same greedy request not streamed (#36339, streamed arguments malformed).
ARGUMENTS_WRAPPER = "arguments_wrapper"
CALLS_IN_ONE_DELTA = "calls_in_one_delta"
STREAM_MISMATCH = "stream_mismatch"
# Not corruption: the call did not fit in max_tokens (e.g. reasoning used the budget).
CUT_BY_MAX_TOKENS = "cut_by_max_tokens"

# Tool-call markup that must never leak into `content` when the parser works: DSV4's DSML
# (`<｜DSML｜tool_calls>`, `<｜DSML｜invoke name=…>`, `</｜DSML｜parameter>`; U+FF5C bars, ASCII
# bars accepted too), older DeepSeek tokens and generic JSON/XML tool-call formats.
_MARKUP = re.compile(
    r"[｜|]DSML[｜|]|<\|?tool[▁_ ]?calls?|<tool_call>|<｜tool|\"arguments\"\s*:", re.IGNORECASE
)
# A canary nonce (workload.new_nonce) anywhere in the arguments, to spot other requests' values.
_NONCE = re.compile(r"(?<![0-9a-f])[0-9a-f]{8}(?![0-9a-f])")


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


def assemble(deltas: Iterable[Mapping[str, JSONValue]]) -> list[ToolCall]:
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
                call.problems.append(
                    ToolProblem(ID_CHANGED, f"call {index}: {call.id!r} then {new_id!r}")
                )
        fn = d.get("function") or {}
        name = fn.get("name")
        if name:
            if call.name is None:
                call.name = name
            elif name != call.name:
                call.problems.append(
                    ToolProblem(NAME_CHANGED, f"call {index}: {call.name!r} then {name!r}")
                )
            elif call.arguments:
                # the same name sent again after arguments began: the duplicated-call shape
                call.problems.append(
                    ToolProblem(NAME_CHANGED, f"call {index}: name {name!r} repeated")
                )
        args = fn.get("arguments")
        if isinstance(args, str):
            call.arguments += args
    return [calls[i] for i in sorted(calls)]


def check_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Mapping[str, object]],
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
        problems.append(
            ToolProblem(MARKUP_IN_CONTENT, f"content has tool-call markup: {content[:80]!r}")
        )
    if not calls:
        if require_call and finish_reason == "length":
            problems.append(
                ToolProblem(
                    CUT_BY_MAX_TOKENS,
                    "no tool call: the output reached " "max_tokens first (finish_reason length)",
                )
            )
        elif require_call:
            problems.append(
                ToolProblem(
                    MISSING_CALL,
                    "no tool call in the response " f"(finish_reason {finish_reason!r})",
                )
            )
        return problems
    for call in calls:
        problems.extend(call.problems)
        problems.extend(_check_one(call, tools, expected_nonce, known_nonces or {}))
    return problems


def _check_one(
    call: ToolCall,
    tools: Mapping[str, Mapping[str, object]],
    expected_nonce: str | None,
    known_nonces: Mapping[str, str],
) -> list[ToolProblem]:
    if not call.name:
        return [ToolProblem(MISSING_NAME, f"call {call.index} has no function name")]
    schema = tools.get(call.name)
    if schema is None:
        return [ToolProblem(UNKNOWN_TOOL, f"call {call.index} names undeclared tool {call.name!r}")]
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return [ToolProblem(INVALID_JSON, f"{call.name}: {exc.msg} in {call.arguments[:120]!r}")]
    if _wrapped(args, schema):
        return [
            ToolProblem(
                ARGUMENTS_WRAPPER,
                f"{call.name}: arguments wrapped in a spurious 'arguments' key "
                f"(sglang#38924): {call.arguments[:120]!r}",
            )
        ]
    if expected_nonce is not None:
        for found in _NONCE.findall(call.arguments):
            owner = known_nonces.get(found)
            if found != expected_nonce and owner is not None:
                return [
                    ToolProblem(
                        CROSS_TALK,
                        f"{call.name}: value with nonce {found!r} of "
                        f"request {owner} in {call.arguments[:120]!r}",
                    )
                ]
    errors = validate_schema(args, schema)
    if errors:
        return [ToolProblem(SCHEMA, f"{call.name}: {errors[0]}")]
    if (
        expected_nonce is not None
        and isinstance(args, dict)
        and "nonce" in args
        and args["nonce"] != expected_nonce
    ):
        return [
            ToolProblem(
                NONCE_MISMATCH, f"{call.name}: nonce {args['nonce']!r}, expected {expected_nonce!r}"
            )
        ]
    return []


def _wrapped(args: object, schema: Mapping[str, object]) -> bool:
    """`{"arguments": {...}}` for a tool that has no `arguments` parameter."""
    props = schema.get("properties")
    declared = isinstance(props, Mapping) and "arguments" in props
    return isinstance(args, dict) and list(args) == ["arguments"] and not declared


def validate_schema(value: object, schema: Mapping[str, object]) -> list[str]:
    """Check `value` against a tool's JSON Schema (draft 2020-12, jsonschema); returns one line
    per violation, `$.path: message`, in path order, then by message (empty when valid)."""
    cached = _by_identity.get(id(schema))
    if cached is None or cached[0] is not schema:  # a new schema (or a reused id)
        cached = (schema, _validator(json.dumps(schema, sort_keys=True)))
        _by_identity[id(schema)] = cached
    errors = sorted(
        cached[1].iter_errors(value), key=lambda e: ([str(p) for p in e.absolute_path], e.message)
    )
    return [f"{_json_path(e.absolute_path)}: {e.message[:200]}" for e in errors]


# The tool schemas of a suite are a few constant mappings: looked up by identity first, which
# spares the per-call json.dumps of the content key (the entry keeps the mapping alive).
class _SchemaError(Protocol):
    """What the tool checks read of a jsonschema ValidationError."""

    @property
    def absolute_path(self) -> Iterable[str | int]: ...
    @property
    def message(self) -> str: ...


class _Validator(Protocol):
    """A compiled jsonschema validator (Draft202012Validator), as the tool checks use it."""

    def iter_errors(self, instance: object) -> Iterable[_SchemaError]: ...


_by_identity: dict[int, tuple[Mapping[str, object], _Validator]] = {}


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> _Validator:
    """One compiled validator per distinct schema: a suite checks thousands of calls against a
    handful of tool schemas, and building a validator costs far more than running one."""
    from jsonschema import Draft202012Validator

    validator: _Validator = Draft202012Validator(json.loads(schema_json))
    return validator


def _json_path(parts: Iterable[str | int]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
