"""Request bodies: plain prompts, tool-call prompts with per-request nonces, agentic sessions.

Prompt convention: `CALL <tool> <json>` asks for a call of <tool> with exactly those arguments,
`SAY <text>` for a fixed answer (the twin implements both literally, docs/twin.md; a real model
follows the plain-English instruction that comes with them). Every tool-call request carries a
fresh nonce the call must echo, planted in each of its string arguments, so a value from another
request (cross-talk) is caught whichever argument it lands in.

Thinking (`canary.thinking`): every body asks for `chat_template_kwargs: {"thinking": true}`
(DSV4's reasoning is off without it), and requests that must end in a call or a fixed answer get
`thinking_budget` more max_tokens, because reasoning tokens count against max_tokens.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

# One chat message as sent: a role and its content, or an assistant's calls, or a tool's result.
Message = dict[str, object]


class ToolFunction(TypedDict):
    name: str
    description: str
    parameters: dict[str, object]  # the JSON Schema of the arguments


class Tool(TypedDict):
    """One entry of a request's `tools`."""

    type: str
    function: ToolFunction


class ChatBody(TypedDict):
    """A chat-completions request as the canary sends it (in this key order)."""

    model: str
    messages: list[Message]
    max_tokens: int
    temperature: float
    stream: bool
    stream_options: dict[str, bool]
    tools: NotRequired[list[Tool]]
    tool_choice: NotRequired[str]
    chat_template_kwargs: NotRequired[dict[str, bool]]


RECORD_STEP: Tool = {
    "type": "function",
    "function": {
        "name": "record_step",
        "description": "Record one step of an agent session.",
        "parameters": {
            "type": "object",
            "properties": {
                "nonce": {"type": "string", "pattern": "^[0-9a-f]{8}$"},
                "session": {"type": "string"},
                "step": {"type": "integer", "minimum": 0},
                "path": {"type": "string"},
            },
            "required": ["nonce", "session", "step"],
            "additionalProperties": False,
        },
    },
}
LOOKUP_ORDER: Tool = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order by id.",
        "parameters": {
            "type": "object",
            "properties": {
                "nonce": {"type": "string", "pattern": "^[0-9a-f]{8}$"},
                "order_id": {"type": "integer", "minimum": 0},
                "fields": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["nonce", "order_id"],
            "additionalProperties": False,
        },
    },
}
_STR: dict[str, object] = {"type": "string"}
_HUNK: dict[str, object] = {
    "type": "object",
    "properties": {
        "start": {"type": "integer", "minimum": 0},
        "lines": {"type": "array", "items": _STR},
    },
    "required": ["start", "lines"],
    "additionalProperties": False,
}
# Nested arrays of objects and long arguments: the shape whose streamed arguments broke most
# often (sglang#36339: 13.8 % with nested arrays); sent by the corruption suite's stream pairs.
EDIT_FILES: Tool = {
    "type": "function",
    "function": {
        "name": "edit_files",
        "description": "Apply a set of edits to several files.",
        "parameters": {
            "type": "object",
            "properties": {
                "nonce": {"type": "string", "pattern": "^[0-9a-f]{8}$"},
                "summary": _STR,
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"path": _STR, "hunks": {"type": "array", "items": _HUNK}},
                        "required": ["path", "hunks"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["nonce", "summary", "edits"],
            "additionalProperties": False,
        },
    },
}
TOOLS: list[Tool] = [RECORD_STEP, LOOKUP_ORDER]
PAIR_TOOLS: list[Tool] = [*TOOLS, EDIT_FILES]
TOOL_SCHEMAS: dict[str, dict[str, object]] = {
    t["function"]["name"]: t["function"]["parameters"] for t in PAIR_TOOLS
}


# A nonce's bytes: none written with decimal digits only, none f0-f9, so that no two-digit piece
# of a nonce is also a piece of a number the request carries (a step, an order id, `/f7.py`):
# a model copying the nonce never meets one of its pieces in a number (issue 38 item 3: the
# tiny DSV4 model's misses were such pieces). 146 values, four distinct: ~28.7 bits.
NONCE_BYTES = tuple(b for b in range(256) if not f"{b:02x}".isdigit() and not 0xF0 <= b <= 0xF9)
_sysrand = secrets.SystemRandom()


def new_nonce() -> str:
    """8 hex digits, four distinct bytes of NONCE_BYTES: four tokens for a model to copy where
    12 digits were six; `NonceBook` keeps a run's nonces distinct."""
    return "".join(f"{b:02x}" for b in _sysrand.sample(NONCE_BYTES, 4))


@dataclass(frozen=True)
class Thinking:
    """Whether requests ask the model to reason first, and the extra max_tokens that takes."""

    on: bool = False
    budget: int = 1024

    def extra_tokens(self) -> int:
        return self.budget if self.on else 0


NO_THINKING = Thinking()


def base_body(
    messages: list[Message],
    *,
    max_tokens: int,
    model: str = "default",
    tools: list[Tool] | None = None,
    thinking: Thinking = NO_THINKING,
) -> ChatBody:
    body: ChatBody = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    if thinking.on:
        body["chat_template_kwargs"] = {"thinking": True}
    return body


def call_prompt(tool: str, args: Mapping[str, object]) -> str:
    return (
        f"CALL {tool} {json.dumps(args, separators=(',', ':'))}\n"
        f"Call the function {tool} with exactly the JSON arguments above. Write nothing else."
    )


def text_prompt(i: int) -> str:
    """A deterministic free-text prompt (no tool, no fixed answer)."""
    return f"Describe decode step number {i} of the canary in one short paragraph."


@dataclass
class ToolExpectation:
    """What a tool-call request must come back with."""

    tool: str
    nonce: str
    args: dict[str, object]


@dataclass
class NonceBook:
    """Every nonce issued in a run (nonce → request id), to tell cross-talk from corruption."""

    owners: dict[str, str] = field(default_factory=dict)

    def issue(self, rid: str) -> str:
        nonce = new_nonce()
        while nonce in self.owners:  # ~28.7 bits: a repeat in ~1 run in 200 of 2,000 nonces
            nonce = new_nonce()
        self.owners[nonce] = rid
        return nonce


class Mix:
    """Body factory for throughput suites: plain prompts with every `tool_every`-th a tool call."""

    def __init__(
        self,
        *,
        prefix: str,
        max_tokens: int,
        model: str = "default",
        tool_every: int = 0,
        nonces: NonceBook | None = None,
        thinking: Thinking = NO_THINKING,
    ) -> None:
        self.prefix = prefix
        self.thinking = thinking
        self.max_tokens = max_tokens
        self.model = model
        self.tool_every = tool_every
        self.nonces = nonces or NonceBook()
        self.expect: dict[str, ToolExpectation] = {}
        self._order = itertools.count()

    def __call__(self, i: int) -> tuple[str, ChatBody]:
        rid = f"{self.prefix}-{i}"
        if self.tool_every and i % self.tool_every == self.tool_every - 1:
            nonce = self.nonces.issue(rid)
            args: dict[str, object] = {"nonce": nonce, "order_id": next(self._order)}
            self.expect[rid] = ToolExpectation("lookup_order", nonce, args)
            msgs: list[Message] = [{"role": "user", "content": call_prompt("lookup_order", args)}]
            return rid, base_body(
                msgs,
                max_tokens=max(self.max_tokens, 96) + self.thinking.extra_tokens(),
                model=self.model,
                tools=TOOLS,
                thinking=self.thinking,
            )
        msgs = [{"role": "user", "content": text_prompt(i)}]
        return rid, base_body(
            msgs, max_tokens=self.max_tokens, model=self.model, thinking=self.thinking
        )


def session_turn_body(
    history: list[Message],
    session: str,
    step: int,
    nonce: str,
    *,
    model: str = "default",
    max_tokens: int = 128,
    thinking: Thinking = NO_THINKING,
) -> tuple[ChatBody, ToolExpectation]:
    args: dict[str, object] = {
        "nonce": nonce,
        "session": f"{session}-{nonce}",
        "step": step,
        "path": f"/work/{session}/{nonce}/f{step}.py",
    }
    history.append({"role": "user", "content": call_prompt("record_step", args)})
    body = base_body(
        list(history),
        max_tokens=max_tokens + thinking.extra_tokens(),
        model=model,
        tools=TOOLS,
        thinking=thinking,
    )
    return body, ToolExpectation("record_step", nonce, args)


def append_tool_turn(
    history: list[Message], call_id: str, name: str, arguments: str, result: str
) -> None:
    """What an agent harness does after a call: the assistant's call, then the tool's result."""
    history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
    )
    history.append({"role": "tool", "tool_call_id": call_id, "content": result})


def pair_body(
    i: int, nonce: str, *, model: str = "default", thinking: Thinking = NO_THINKING
) -> tuple[ChatBody, list[ToolExpectation]]:
    """Two parallel calls in one answer (sglang#37634 lost all but the first when one delta
    carried both): `edit_files` with nested arrays of objects and the suite's longest
    arguments, then `record_step`."""
    # kept to ~140 of the twin's tokens, so a pair started after the sessions' first turn ends
    # with their last (the suite's time is tight)
    edits = [
        {
            "path": f"/work/pair{i}/{nonce}/decode.py",
            "hunks": [{"start": 10 + i, "lines": [f"# {nonce}", f"value = {i}"]}],
        }
    ]
    calls: list[tuple[str, dict[str, object]]] = [
        (
            "edit_files",
            {
                "nonce": nonce,
                "summary": f"Pair {i} {nonce}: rename the decode step helper, update the "
                "router's call sites",
                "edits": edits,
            },
        ),
        ("record_step", {"nonce": nonce, "session": f"pair{i}-{nonce}", "step": i}),
    ]
    prompt = "".join(
        f"CALL {tool} {json.dumps(args, separators=(',', ':'))}\n" for tool, args in calls
    )
    ask = "Call both functions, in this order, each with exactly its JSON arguments above."
    body = base_body(
        [{"role": "user", "content": prompt + ask + " Write nothing else."}],
        max_tokens=384 + thinking.extra_tokens(),
        model=model,
        tools=PAIR_TOOLS,
        thinking=thinking,
    )
    return body, [ToolExpectation(tool, nonce, args) for tool, args in calls]
