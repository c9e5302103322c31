"""The light end-to-end probe of `dsv4ops watch`: one streamed generation and one streamed tool
call with a fresh nonce, through the router, judged on content.

Like the deploy probe, it is the only check that exercises the KV transfer from prefill to
decode (the workers' /health never does). The tool call asks for `record_step` with exactly
`{"nonce": N, "session": "watch-N", "step": K}` (the canary's prompt convention, which the twin
implements literally and a real model follows as an instruction), so a call carrying another
request's values (cross-talk), a dropped call or DSML markup in `content` is caught by the
canary's own checks (`canary.toolcalls`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dsv4ops.canary.toolcalls import CUT_BY_MAX_TOKENS, assemble, check_calls
from dsv4ops.canary.workload import RECORD_STEP, TOOL_SCHEMAS, call_prompt, new_nonce
from dsv4ops.jsontypes import JSONObject
from dsv4ops.remote.results import HttpReply

TEXT_MAX_TOKENS = 16
TOOL_MAX_TOKENS = 1024  # ~30 tokens for the call, the rest for reasoning that may come first

OK, STALLED, FAILED, CORRUPT = "ok", "stalled", "failed", "corrupt"


@dataclass(frozen=True)
class ProbeRequest:
    kind: str  # "generation" | "tool_call"
    body: Mapping[str, object]
    nonce: str | None = None
    expected_args: Mapping[str, object] | None = None


@dataclass(frozen=True)
class ProbeOutcome:
    kind: str
    status: str  # ok | stalled (no answer in time) | failed (error, no text) | corrupt
    detail: str
    elapsed_s: float
    http_status: int | None = None  # the reply's, when it was no 200

    @property
    def unauthorized(self) -> bool:
        """The router refused this machine's credentials: evidence about the key watch sends,
        none about the unit behind the router."""
        return self.http_status in (401, 403)


def probe_requests(model: str, round_no: int, *, tool_call: bool = True) -> list[ProbeRequest]:
    """The round's probes; `tool_call` False (the profile's canary.tool_calls: the model cannot
    echo a nonce) sends the generation alone."""
    nonce = new_nonce()
    args = {"nonce": nonce, "session": f"watch-{nonce}", "step": round_no}
    stream = {"stream": True, "temperature": 0.0, "model": model}
    text = {
        "messages": [
            {
                "role": "user",
                "content": f"Watch probe {round_no}: reply with one " "short sentence.",
            }
        ],
        "max_tokens": TEXT_MAX_TOKENS,
        **stream,
    }
    tool = {
        "messages": [{"role": "user", "content": call_prompt("record_step", args)}],
        "tools": [RECORD_STEP],
        "tool_choice": "auto",
        "max_tokens": TOOL_MAX_TOKENS,
        **stream,
    }
    gen = ProbeRequest("generation", text)
    return [gen, ProbeRequest("tool_call", tool, nonce, args)] if tool_call else [gen]


@dataclass
class _Stream:
    text: str = ""
    content: str = ""
    finish: str | None = None
    done: bool = False
    problem: str | None = None
    deltas: list[JSONObject] | None = None


def parse_stream(body: str) -> _Stream:
    """An SSE chat-completion body: generated text (reasoning included), content, tool-call
    deltas, finish reason, whether [DONE] came, and the first error event or undecodable one."""
    s = _Stream(deltas=[])
    for event in body.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")
        )
        if not data:
            continue
        if data.strip() == "[DONE]":
            s.done = True
            continue
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            s.problem = s.problem or f"undecodable stream event {data[:80]!r}"
            continue
        if isinstance(chunk, dict) and "error" in chunk:
            s.problem = s.problem or f"error event: {str(chunk['error'])[:160]}"
            continue
        for choice in (chunk.get("choices") or []) if isinstance(chunk, dict) else []:
            delta = choice.get("delta") or {}
            s.content += delta.get("content") or ""
            s.text += (delta.get("reasoning_content") or "") + (delta.get("content") or "")
            assert s.deltas is not None
            s.deltas.extend(delta.get("tool_calls") or [])
            s.finish = choice.get("finish_reason") or s.finish
    return s


def judge(req: ProbeRequest, reply: HttpReply) -> ProbeOutcome:
    def out(status: str, detail: str) -> ProbeOutcome:
        code = reply.status if reply.status != 200 else None
        return ProbeOutcome(req.kind, status, detail, reply.elapsed_s, code)

    if reply.status is None:
        return out(STALLED, f"no answer in time ({reply.error or 'no reply'})")
    if reply.status != 200:
        return out(FAILED, f"HTTP {reply.status}: {reply.body[:160].strip()}")
    s = parse_stream(reply.body)
    if s.problem:
        return out(FAILED, s.problem)
    if not s.done:
        return out(STALLED, "the stream ended without [DONE]")
    if req.kind == "generation":
        if not s.text.strip():
            return out(FAILED, "no generated text in the stream")
        return out(OK, f"{len(s.text)} chars, finish={s.finish}")
    return _judge_tool_call(req, s, out)


def _judge_tool_call(
    req: ProbeRequest, s: _Stream, out: Callable[[str, str], ProbeOutcome]
) -> ProbeOutcome:
    calls = assemble(s.deltas or [])
    problems = check_calls(
        calls, TOOL_SCHEMAS, expected_nonce=req.nonce, content=s.content, finish_reason=s.finish
    )
    if any(p.kind == CUT_BY_MAX_TOKENS for p in problems):
        return out(FAILED, f"the call did not fit in {TOOL_MAX_TOKENS} max_tokens")
    if not problems and calls:
        try:
            args = json.loads(calls[0].arguments or "{}")
        except json.JSONDecodeError:  # check_calls reports it; kept for a type-safe read
            args = None
        if args != req.expected_args:
            return out(
                CORRUPT,
                f"record_step arguments {calls[0].arguments[:120]!r}, "
                f"expected {json.dumps(req.expected_args)}",
            )
    if problems:
        return out(CORRUPT, "; ".join(str(p) for p in problems)[:240])
    return out(OK, "record_step called with this probe's nonce and arguments")
