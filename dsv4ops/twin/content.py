"""Deterministic model output: the same prompt gives the same text and tool call at any batch size.

Prompt convention (the last user message; see docs/twin.md):
  * `CALL <tool_name> <json-object>`  → call that tool with exactly those arguments;
  * `SAY <text>`                      → answer exactly <text>, then stop;
  * with `tools` and tool_choice not "none": call a tool (one named in the message, else the
    forced one, else one picked by hash); arguments follow its JSON schema, taking values named in
    the message as `key=value` or in a JSON object;
  * otherwise: pseudo-text of max_tokens tokens derived from a hash of the prompt.

A tool call is decoded as its DSML markup (`dsml.py`), one stand-in token per step; with
`chat_template_kwargs.thinking` the answer is preceded by reasoning tokens and `</think>`. Both
count against max_tokens, as on SGLang.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

from . import dsml
from .calls import (
    CALL_DROPPED,
    CALL_IN_CONTENT,
    CALL_PARSED,
    Piece,
    ToolCall,
    call_pieces,
    make_call,
    make_calls,
)

_WORDS = (
    "the decode step moves tokens through experts while attention reads the cache and the "
    "scheduler plans the next batch so every request advances one token per step under the graph "
    "bucket that pads the batch to its captured size prefill fills pages transfer carries blocks"
).split()
_CALL_RE = re.compile(r"CALL\s+([A-Za-z_][\w.-]*)\s+(\{.*\})", re.S)
_CALL_HEAD_RE = re.compile(r"CALL\s+([A-Za-z_][\w.-]*)\s+(?=\{)")
_SAY_RE = re.compile(r"SAY\s+(.+)", re.S)
_KV_RE = re.compile(r"\b([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|[^\s,;]+)")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
DEFAULT_REASONING_TOKENS = 32


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: words and punctuation marks."""
    return max(1, len(_TOKEN_RE.findall(text)))


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def _pick(key: str, n: int, i: int = 0) -> int:
    return int.from_bytes(_digest(key, str(i))[:8], "big") % n


@dataclass
class Plan:
    """What the model will emit for one request: reasoning, then text or one tool call."""

    key: str
    text_pieces: Sequence[str]
    tool_call: ToolCall | None
    natural_stop: bool  # True if the output ends before max_tokens by itself
    reasoning: Sequence[str] = ()
    reasoning_parsed: bool = True  # False without --reasoning-parser: reasoning is content
    call_shape: str = CALL_PARSED
    # parsed by deepseek-recipe (--tool-call-parser deepseekv4, recipe.RECIPE_TOOL_PARSERS), not
    # by a detector: string values as written, a malformed invoke streamed as decoded
    recipe: bool = False
    _pieces_cache: list[Piece] | None = field(default=None, init=False, repr=False, compare=False)

    def _thinking_len(self) -> int:
        return len(self.reasoning) + 1 if self.reasoning else 0  # + `</think>`

    def token_count(self) -> int:
        answer = len(self.call_pieces()) if self.tool_call is not None else len(self.text_pieces)
        return self._thinking_len() + answer

    def finish_reason(self) -> str:
        """How the output ends when it is not cut by max_tokens."""
        parsed = self.tool_call is not None and self.call_shape in self._calls_made()
        return "tool_calls" if parsed else "stop"

    def piece(self, i: int) -> Piece:
        n = len(self.reasoning)
        if i < n:
            return ("reasoning" if self.reasoning_parsed else "text", self.reasoning[i])
        if n and i == n:
            return ("hidden" if self.reasoning_parsed else "text", dsml.THINK_END)
        j = i - self._thinking_len()
        if self.tool_call is not None:
            return self.call_pieces()[j]
        return ("text", self.text_pieces[j])

    def _calls_made(self) -> tuple[str, ...]:
        """The call shapes the parser turns into calls."""
        return (CALL_PARSED, CALL_DROPPED) if self.recipe else (CALL_PARSED,)

    def set_call(self, call: ToolCall | None, shape: str | None = None) -> None:
        self.tool_call = call
        self.call_shape = shape or self.call_shape
        self._pieces_cache = None

    def call_pieces(self) -> list[Piece]:
        if self._pieces_cache is None:
            self._pieces_cache = (
                call_pieces(self.tool_call, self.call_shape, self.recipe)
                if self.tool_call is not None
                else []
            )
        return self._pieces_cache


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

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._word(j) for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self._word(i)


def pseudo_text(key: str, n: int) -> PseudoText:
    return PseudoText(key, n)


def _message_text(message: Mapping[str, object]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def prompt_of_messages(messages: Sequence[Mapping[str, object]]) -> str:
    return "\n".join(f"{m.get('role', '')}: {_message_text(m)}" for m in messages)


def last_user_text(messages: Sequence[Mapping[str, object]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            return _message_text(m)
    return ""


def _first_json_object(text: str) -> dict[str, object] | None:
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


def _named_values(text: str) -> dict[str, object]:
    values: dict[str, object] = {}
    for key, raw in _KV_RE.findall(text):
        values[key] = raw[1:-1] if raw[:1] in "\"'" else _scalar(raw)
    obj = _first_json_object(text)
    if obj:
        values.update(obj)
    return values


def _scalar(raw: str) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _value_for(schema: Mapping[str, object], key: str) -> object:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    enum = schema.get("enum")
    if isinstance(enum, Sequence) and enum:
        return enum[_pick(key, len(enum))]
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


def _arguments_for(
    tool: Mapping[str, object], named: Mapping[str, object], key: str
) -> dict[str, object]:
    params = _object(tool.get("parameters") or {})
    props = _object(params.get("properties") or {})
    if not props:
        return dict(named)
    required = params.get("required") or []
    args: dict[str, object] = {}
    for prop, schema in props.items():
        if prop in named:
            args[prop] = named[prop]
        elif prop in _container(required):
            args[prop] = _value_for(schema if isinstance(schema, dict) else {}, f"{key}/{prop}")
    return args


def _object(value: object) -> Mapping[str, object]:
    """A part of a tool's JSON schema read as an object; anything else fails as reading it
    did before it had a type (AttributeError)."""
    if not isinstance(value, Mapping):
        raise AttributeError(f"{type(value).__name__!r} object has no attribute 'get'")
    return value


def _container(value: object) -> Container[object]:
    """`required` read as a container (`in`); anything else fails as before (TypeError)."""
    if not isinstance(value, Container):
        raise TypeError(f"argument of type {type(value).__name__!r} is not iterable")
    return value


def _functions(tools: Sequence[object] | None) -> list[Mapping[str, object]]:
    out: list[Mapping[str, object]] = []
    for t in tools or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append(fn)
    return out


def _name(fn: Mapping[str, object]) -> str:
    """A function's name (`_functions` keeps only those whose name is a string)."""
    return str(fn["name"])


def _choose_tool(
    fns: Sequence[Mapping[str, object]], tool_choice: object, text: str, key: str
) -> Mapping[str, object] | None:
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        return next((f for f in fns if f["name"] == wanted), None)
    named = [f for f in fns if re.search(rf"\b{re.escape(_name(f))}\b", text)]
    if named:
        return named[0]
    return fns[_pick(key, len(fns))]


@dataclass(frozen=True)
class ChatOptions:
    """What the server and the request add to the plan (SGLang's parsers, thinking)."""

    tool_parser: bool = True  # --tool-call-parser set: DSML becomes tool calls
    reasoning_parser: bool = False  # --reasoning-parser set: reasoning is reasoning_content
    thinking: bool = False  # chat_template_kwargs.thinking is true
    reasoning_tokens: int = DEFAULT_REASONING_TOKENS
    recipe: bool = False  # the tool-call parser is deepseek-recipe's (Plan.recipe)


def plan_chat(
    messages: Sequence[Mapping[str, object]],
    tools: Sequence[object] | None,
    tool_choice: object,
    max_tokens: int,
    options: ChatOptions | None = None,
) -> Plan:
    """The deterministic answer to a chat request."""
    options = options or ChatOptions()
    plan = _answer(messages, tools, tool_choice, max_tokens)
    plan.recipe = options.recipe and options.tool_parser
    if plan.tool_call is not None and not options.tool_parser:
        plan.set_call(plan.tool_call, CALL_IN_CONTENT)
    if options.thinking and options.reasoning_tokens > 0:
        plan.reasoning = pseudo_text(plan.key + "\x1fthink", options.reasoning_tokens)
        plan.reasoning_parsed = options.reasoning_parser
        if not plan.natural_stop:  # free text fills what the reasoning left of max_tokens
            plan.text_pieces = pseudo_text(plan.key, max(0, max_tokens - plan._thinking_len()))
    return plan


def _answer(
    messages: Sequence[Mapping[str, object]],
    tools: Sequence[object] | None,
    tool_choice: object,
    max_tokens: int,
) -> Plan:
    key = prompt_of_messages(messages)
    text = last_user_text(messages)
    fns = _functions(tools)
    tools_allowed = bool(fns) and tool_choice != "none"
    call = _CALL_RE.search(text)
    if call and tools_allowed:
        calls = _calls_asked(text, fns)
        if calls:
            return Plan(key, [], make_calls(calls), True)
    say = _SAY_RE.search(text)
    if say and not (call and tools_allowed):
        return Plan(key, _pieces_of(say.group(1).strip()), None, True)
    if tools_allowed:
        fn = _choose_tool(fns, tool_choice, text, key)
        if fn is not None:
            return Plan(
                key, [], make_call(_name(fn), _arguments_for(fn, _named_values(text), key)), True
            )
    return Plan(key, pseudo_text(key, max_tokens), None, False)


def _calls_asked(
    text: str, fns: Sequence[Mapping[str, object]]
) -> list[tuple[str, Mapping[str, object]]]:
    """Each `CALL <tool> <json>` of a declared tool, in order (several: parallel calls)."""
    names = {f["name"] for f in fns}
    calls: list[tuple[str, Mapping[str, object]]] = []
    for m in _CALL_HEAD_RE.finditer(text):
        obj = _first_json_object(text[m.end() :])
        if m.group(1) in names and obj is not None:
            calls.append((m.group(1), obj))
    return calls


def plan_completion(prompt: str, max_tokens: int) -> Plan:
    say = _SAY_RE.search(prompt)
    if say:
        return Plan(prompt, _pieces_of(say.group(1).strip()), None, True)
    return Plan(prompt, pseudo_text(prompt, max_tokens), None, False)


def _pieces_of(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text) or [text]
