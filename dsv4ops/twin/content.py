"""Deterministic model output: the same prompt gives the same text and tool call at any batch size.

Prompt convention (the last user message; see docs/twin.md):
  * `CALL <tool_name> <json-object>`  → call that tool with exactly those arguments;
  * `SAY <text>`                      → answer exactly <text>, then stop;
  * with `tools` and tool_choice not "none": call a tool (one named in the message, else the
    forced one, else one picked by hash); arguments follow its JSON schema, taking values named in
    the message as `key=value` or in a JSON object;
  * otherwise: pseudo-text of max_tokens tokens derived from a hash of the prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_WORDS = (
    "the decode step moves tokens through experts while attention reads the cache and the "
    "scheduler plans the next batch so every request advances one token per step under the graph "
    "bucket that pads the batch to its captured size prefill fills pages transfer carries blocks"
).split()
_CALL_RE = re.compile(r"CALL\s+([A-Za-z_][\w.-]*)\s+(\{.*\})", re.S)
_SAY_RE = re.compile(r"SAY\s+(.+)", re.S)
_KV_RE = re.compile(r"\b([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|[^\s,;]+)")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
ARG_CHUNK_CHARS = 4


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: words and punctuation marks."""
    return max(1, len(_TOKEN_RE.findall(text)))


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def _pick(key: str, n: int, i: int = 0) -> int:
    return int.from_bytes(_digest(key, str(i))[:8], "big") % n


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI carries it


@dataclass
class Plan:
    """What the model will emit for one request: pieces are text or argument fragments."""

    key: str
    text_pieces: Sequence[str]
    tool_call: ToolCall | None
    natural_stop: bool  # True if the output ends before max_tokens by itself

    def token_count(self) -> int:
        if self.tool_call is not None:
            return 1 + len(split_arguments(self.tool_call.arguments))
        return len(self.text_pieces)


def split_arguments(arguments: str) -> list[str]:
    return [arguments[i:i + ARG_CHUNK_CHARS] for i in range(0, len(arguments), ARG_CHUNK_CHARS)]


class PseudoText(Sequence[str]):
    """`n` pseudo-words derived from `key`, computed on demand (max_tokens may be huge).

    `garble` = (donor pieces, phase): every third word from `phase` on is replaced by a donor
    word plus U+FFFD, the way the multi-stream race garbled text.
    """

    def __init__(self, key: str, n: int, garble: tuple[Sequence[str], int] | None = None) -> None:
        self.key, self.n, self.garble = key, n, garble

    def __len__(self) -> int:
        return self.n

    def _word(self, i: int) -> str:
        if self.garble is not None and i >= self.garble[1] and (i - self.garble[1]) % 3 == 0:
            donor = self.garble[0]
            return donor[i % len(donor)] + "\ufffd"
        return (" " if i else "") + _WORDS[_pick(self.key, len(_WORDS), i)]

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._word(j) for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self._word(i)


def pseudo_text(key: str, n: int) -> PseudoText:
    return PseudoText(key, n)


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def prompt_of_messages(messages: list[dict[str, Any]]) -> str:
    return "\n".join(f"{m.get('role', '')}: {_message_text(m)}" for m in messages)


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return _message_text(m)
    return ""


def _first_json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    return None


def _named_values(text: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, raw in _KV_RE.findall(text):
        values[key] = raw[1:-1] if raw[:1] in "\"'" else _scalar(raw)
    obj = _first_json_object(text)
    if obj:
        values.update(obj)
    return values


def _scalar(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _value_for(schema: dict[str, Any], key: str) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][_pick(key, len(schema["enum"]))]
    if kind == "integer":
        return _pick(key, 1000)
    if kind == "number":
        return _pick(key, 100000) / 100
    if kind == "boolean":
        return bool(_pick(key, 2))
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return _digest(key).hex()[:8]


def _arguments_for(tool: dict[str, Any], named: dict[str, Any], key: str) -> dict[str, Any]:
    params = tool.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    if not props:
        return dict(named)
    args: dict[str, Any] = {}
    for prop, schema in props.items():
        if prop in named:
            args[prop] = named[prop]
        elif prop in (params.get("required") or []):
            args[prop] = _value_for(schema if isinstance(schema, dict) else {}, f"{key}/{prop}")
    return args


def _functions(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for t in tools or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append(fn)
    return out


def _choose_tool(
    fns: list[dict[str, Any]], tool_choice: Any, text: str, key: str
) -> dict[str, Any] | None:
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        return next((f for f in fns if f["name"] == wanted), None)
    named = [f for f in fns if re.search(rf"\b{re.escape(f['name'])}\b", text)]
    if named:
        return named[0]
    return fns[_pick(key, len(fns))]


def plan_chat(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    tool_choice: Any,
    max_tokens: int,
) -> Plan:
    """The deterministic answer to a chat request."""
    key = prompt_of_messages(messages)
    text = last_user_text(messages)
    fns = _functions(tools)
    tools_allowed = bool(fns) and tool_choice != "none"
    call = _CALL_RE.search(text)
    if call and tools_allowed:
        name, raw = call.group(1), call.group(2)
        obj = _first_json_object(raw)
        if any(f["name"] == name for f in fns) and obj is not None:
            return Plan(key, [], ToolCall(name, json.dumps(obj)), True)
    say = _SAY_RE.search(text)
    if say and not (call and tools_allowed):
        return Plan(key, _pieces_of(say.group(1).strip()), None, True)
    if tools_allowed:
        fn = _choose_tool(fns, tool_choice, text, key)
        if fn is not None:
            args = _arguments_for(fn, _named_values(text), key)
            return Plan(key, [], ToolCall(fn["name"], json.dumps(args)), True)
    return Plan(key, pseudo_text(key, max_tokens), None, False)


def plan_completion(prompt: str, max_tokens: int) -> Plan:
    say = _SAY_RE.search(prompt)
    if say:
        return Plan(prompt, _pieces_of(say.group(1).strip()), None, True)
    return Plan(prompt, pseudo_text(prompt, max_tokens), None, False)


def _pieces_of(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text) or [text]


# --- corruption (the multi-stream-overlap race) -------------------------------------------


def corrupt_plan(plan: Plan, other: Plan | None, roll: int) -> str:
    """Corrupt `plan` in place the way the race did; returns the kind of corruption."""
    if plan.tool_call is not None:
        if other is not None and other.tool_call is not None and other.key != plan.key:
            plan.tool_call = ToolCall(plan.tool_call.name, other.tool_call.arguments)
            return "tool_args_cross_request"
        args = plan.tool_call.arguments
        cut = max(1, len(args) * 3 // 5)
        plan.tool_call = ToolCall(plan.tool_call.name, args[:cut] + '",,')
        return "tool_args_invalid_json"
    donor = list(other.text_pieces[:64]) if other is not None and len(other.text_pieces) else [""]
    phase = roll % 3
    if isinstance(plan.text_pieces, PseudoText):
        plan.text_pieces = PseudoText(plan.key, plan.text_pieces.n, (donor, phase))
    else:
        pieces = list(plan.text_pieces)
        for i in range(phase, len(pieces), 3):
            pieces[i] = donor[i % len(donor)] + "\ufffd"
        plan.text_pieces = pieces
    return "garbled_text"
