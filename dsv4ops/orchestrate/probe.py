"""The end-to-end probe: real generations through the router, checked for content.

This is the only deploy check that exercises the KV transfer from prefill to decode (the
workers' /health generates with a fake bootstrap host and needs no peer; the router's /health
is liveness only). It sends streaming chat completions and a non-streaming one that must call a
tool, and checks what came back, not just the status code.

A server that reasons (DSV4 with --reasoning-parser deepseek-v4 and thinking on, e.g. through
SGLANG_DEFAULT_THINKING) spends tokens on `reasoning_content` first, and those count against
max_tokens: the streaming check counts reasoning as generated output, and the tool-call check
leaves room for reasoning before the call (a model that does not reason stops after the call).

`ProbeThinking` carries the profile's `canary.thinking` settings: when on, every probe request asks
for `chat_template_kwargs: {"thinking": true}` as the canary's do (DSV4 reasons only when asked),
and the tool call gets `thinking_budget_tokens` more max_tokens, so the deploy proves the path
its users take, reasoning parser included.

The tool-call check is what the profile declares its model can do (`probe.tool_call`):
`required` forces the call (`tool_choice: required`: SGLang constrains the output to the tool
parser's call grammar, DSV4's path), `auto` asks for it without the constraint (the parser must
still find a well-formed call: a model that cannot spell the grammar's exact text, like the tiny
CPU model, docs/twin.md), `off` sends none. The step's detail and the journal's probe lines say
which ran: a probe that skipped the call never reads as one that checked it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.apikey import ApiKeyRef, auth_headers
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.remote.results import HttpReply
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind
from dsv4ops.settings import CanaryThresholds

WEATHER_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


class ProbeBody(TypedDict, total=False):
    """A probe's chat request body, its keys in the order they are sent."""

    model: str
    messages: list[dict[str, str]]
    tools: list[dict[str, object]]
    tool_choice: str
    stream: bool
    max_tokens: int
    temperature: float
    chat_template_kwargs: dict[str, bool]


# ~30 tokens for the call itself, the rest for reasoning that may come first
TOOL_CALL_MAX_TOKENS = 1024


@dataclass(frozen=True)
class ProbeThinking:
    """Whether the probe asks the model to reason first, and the extra tokens that takes."""

    on: bool = False
    budget_tokens: int = 1024
    # Off said out loud (`thinking: false`), for a router that reads silence as on
    # (RouterKind.thinking_off_explicit: SMG).
    say_off: bool = False

    @classmethod
    def from_canary(
        cls, canary: CanaryThresholds, router: RouterKind = DEFAULT_ROUTER_KIND
    ) -> ProbeThinking:
        """From a profile's `canary` section (`Deployment.canary`, as recorded), for the router
        the deployment runs (`Deployment.router_kind`)."""
        return cls(
            on=canary.thinking,
            budget_tokens=canary.thinking_budget_tokens,
            say_off=router.thinking_off_explicit,
        )

    def apply(self, payload: ProbeBody, *, extra_tokens: bool) -> ProbeBody:
        """`payload` asking for reasoning when on; `extra_tokens`: room for it in max_tokens."""
        if not self.on:
            return (
                {**payload, "chat_template_kwargs": {"thinking": False}}
                if self.say_off
                else payload
            )
        out: ProbeBody = {**payload, "chat_template_kwargs": {"thinking": True}}
        if extra_tokens:
            out["max_tokens"] = int(payload["max_tokens"]) + self.budget_tokens
        return out


NO_THINKING = ProbeThinking()


TOOL_CALL_MODES = ("required", "auto", "off")


@dataclass
class ProbeResult:
    ok: bool
    checks: list[str] = field(default_factory=list)  # one line per generation, pass or fail
    elapsed_s: float = 0.0
    tool_call: str = "required"  # the profile's probe.tool_call it ran with

    @property
    def failures(self) -> list[str]:
        return [c for c in self.checks if c.startswith("FAIL")]

    def summary(self) -> str:
        """The deploy step's detail: what was generated and which tool-call check ran."""
        sent = [c for c in self.checks if not c.startswith("skip")]
        line = f"{len(sent)} generations through the router, content checked"
        if self.tool_call == "off":
            return line + "; tool-call check skipped (profile probe.tool_call: off)"
        if self.tool_call == "auto":
            return (
                line + "; tool call asked with tool_choice auto, not forced (probe.tool_call: auto)"
            )
        return line


def run_probe(
    control: TargetControl,
    router_url: str,
    *,
    model: str = "default",
    rounds: int = 2,
    timeout_s: float = 20.0,
    thinking: ProbeThinking = NO_THINKING,
    tool_call: str = "required",
    router_key: ApiKeyRef | None = None,
) -> ProbeResult:
    """Send `rounds` x (streaming chat + tool-call chat) through the router; all must pass.
    `thinking`: the profile's canary reasoning settings (`ProbeThinking.from_canary`);
    `tool_call`: the profile's `probe.tool_call` (required, auto or off). `router_key`: where the
    router's API key lives (`Deployment.router_key`), sent as every client of the router does.

    Stops at the first failure: a broken pair often fails by hanging until a timeout, and one
    failure is enough to reject the deployment.
    """
    if tool_call not in TOOL_CALL_MODES:
        raise ValueError(f"probe.tool_call must be one of {TOOL_CALL_MODES}, got {tool_call!r}")
    result = ProbeResult(ok=True, tool_call=tool_call)
    router = _Router(control, router_url, auth_headers(router_key))
    for i in range(max(1, rounds)):
        for check in (_streaming_chat, _tool_call_chat):
            if check is _tool_call_chat and tool_call == "off":
                result.checks.append(
                    "skip tool-call chat: not asked (profile probe.tool_call: off)"
                )
                continue
            line, elapsed = check(router, model, timeout_s, i, thinking, tool_call)
            result.checks.append(line)
            result.elapsed_s += elapsed
            if line.startswith("FAIL"):
                result.ok = False
                return result
    return result


@dataclass(frozen=True)
class _Router:
    """The router as the probe reaches it: from the target, with the client headers the
    deployment's router requires (its API key: dsv4ops/apikey.py's auth_headers)."""

    control: TargetControl
    base: str
    headers: Mapping[str, str]

    def post(self, path: str, payload: Mapping[str, object], timeout_s: float) -> HttpReply:
        return self.control.http(
            self.base + path,
            method="POST",
            body=json.dumps(payload),
            headers={"Content-Type": "application/json", **self.headers},
            timeout_s=timeout_s,
        )


def _streaming_chat(
    router: _Router,
    model: str,
    timeout_s: float,
    i: int,
    thinking: ProbeThinking,
    _tool_call: str,
) -> tuple[str, float]:
    payload: ProbeBody = {
        "model": model,
        "messages": [{"role": "user", "content": f"Probe {i}: reply with one short sentence."}],
        "stream": True,
        "max_tokens": 16,
        "temperature": 0,
    }
    # 16 tokens may all be reasoning: counted as generated output, no extra budget needed
    payload = thinking.apply(payload, extra_tokens=False)
    reply = router.post("/v1/chat/completions", payload, timeout_s)
    if reply.status != 200:
        return _fail("streaming chat", reply), reply.elapsed_s
    text, finish, done, problem = parse_chat_stream(reply.body)
    if problem:
        return f"FAIL streaming chat: {problem}", reply.elapsed_s
    if not done:
        return "FAIL streaming chat: stream ended without [DONE]", reply.elapsed_s
    if not text.strip():
        return "FAIL streaming chat: no generated text in the stream", reply.elapsed_s
    return f"ok   streaming chat: {len(text)} chars, finish={finish}", reply.elapsed_s


def _tool_call_chat(
    router: _Router,
    model: str,
    timeout_s: float,
    i: int,
    thinking: ProbeThinking,
    tool_call: str,
) -> tuple[str, float]:
    payload: ProbeBody = {
        "model": model,
        "messages": [{"role": "user", "content": f"Probe {i}: what is the weather in Paris?"}],
        "tools": [WEATHER_TOOL],
        "tool_choice": tool_call,  # required or auto (off never gets here)
        "stream": False,
        "max_tokens": TOOL_CALL_MAX_TOKENS,
        "temperature": 0,
    }
    payload = thinking.apply(payload, extra_tokens=True)
    reply = router.post("/v1/chat/completions", payload, timeout_s)
    if reply.status != 200:
        return _fail("tool-call chat", reply), reply.elapsed_s
    problem = check_tool_call_reply(reply.body, max_tokens=payload["max_tokens"])
    if problem:
        return f"FAIL tool-call chat: {problem}", reply.elapsed_s
    line = f"ok   tool-call chat ({tool_call}): get_weather called with valid arguments"
    reasoned = _reasoning_chars(reply.body)
    return (line + (f", after {reasoned} chars of reasoning" if reasoned else "")), reply.elapsed_s


def _reasoning_chars(body: str) -> int:
    """Characters of `reasoning_content` in a (checked) non-streaming reply."""
    message = json.loads(body)["choices"][0]["message"]
    return len(message.get("reasoning_content") or "")


def _fail(what: str, reply: HttpReply) -> str:
    if reply.status is None:
        return f"FAIL {what}: no answer ({reply.error})"
    return f"FAIL {what}: HTTP {reply.status}: {reply.body[:200].strip()}"


def parse_chat_stream(body: str) -> tuple[str, str | None, bool, str | None]:
    """(text, finish_reason, saw [DONE], problem) of an SSE chat-completion stream body; `text`
    includes `reasoning_content` (generated output too, and possibly all of it at small
    max_tokens)."""
    text: list[str] = []
    finish = None
    done = False
    for event in body.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")
        )
        if not data:
            continue
        if data.strip() == "[DONE]":
            done = True
            continue
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            return "".join(text), finish, done, f"undecodable stream event {data[:80]!r}"
        if "error" in chunk:
            return (
                "".join(text),
                finish,
                done,
                f"error event in stream: {str(chunk['error'])[:200]}",
            )
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append((delta.get("reasoning_content") or "") + (delta.get("content") or ""))
            finish = choice.get("finish_reason") or finish
    return "".join(text), finish, done, None


def check_tool_call_reply(body: str, *, max_tokens: int = TOOL_CALL_MAX_TOKENS) -> str | None:
    """None if the reply calls get_weather with JSON arguments naming a city, else the problem
    (`max_tokens`: what the request allowed, named when reasoning used it all)."""
    try:
        data = json.loads(body)
        message = data["choices"][0]["message"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        return f"not a chat completion: {body[:200]!r}"
    calls = message.get("tool_calls") or []
    if not calls:
        finish = data["choices"][0].get("finish_reason")
        if finish == "length" and message.get("reasoning_content"):
            return (
                f"no tool call: reasoning used all {max_tokens} max_tokens "
                f"(reasoning: {str(message['reasoning_content'])[:60]!r})"
            )
        return f"no tool call in the reply (content: {str(message.get('content'))[:80]!r})"
    fn = calls[0].get("function") or {}
    if fn.get("name") != "get_weather":
        return f"called unknown tool {fn.get('name')!r}"
    try:
        args = json.loads(fn.get("arguments") or "")
    except json.JSONDecodeError:
        return f"tool arguments are not JSON: {str(fn.get('arguments'))[:80]!r}"
    if not isinstance(args, dict) or not isinstance(args.get("city"), str) or not args["city"]:
        return f"tool arguments lack a city: {args!r}"
    return None
