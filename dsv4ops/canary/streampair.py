"""Stream pairs: the same greedy tool-call request streamed and not streamed, compared.

What SGLang operators of DeepSeek-V4 hit in 2026 breaks only what is streamed: deepseekv4's
streamed arguments malformed in 2.5-5 % of calls and 13.8 % with nested arrays, 0 % with
`stream=false` (sglang#36339); a spurious `"arguments"` wrapper key (#38924); parallel calls lost
when one delta carries several, as with speculative decoding (#37634). And only under load
(vllm-project/vllm#48089: clean at concurrency 1, corrupted at 16 and above). A pair asks for two
parallel calls, the first with nested arrays and long arguments (workload.pair_body), sends both
forms at once while the corruption suite's sessions run, checks the streamed calls and compares
them with the whole answer's (`stream_mismatch`). A sample, not every request: the whole answer
arrives only at the end and the suite's time is tight.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass

from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.suites.common import ARGS_MISMATCH
from dsv4ops.canary.toolcalls import (
    CALLS_IN_ONE_DELTA,
    STREAM_MISMATCH,
    ToolCall,
    ToolProblem,
    check_calls,
)
from dsv4ops.canary.workload import TOOL_SCHEMAS, NonceBook, Thinking, ToolExpectation, pair_body
from dsv4ops.jsontypes import JSONObject


@dataclass
class PairOutcome:
    rid: str
    problems: list[ToolProblem]
    # why the whole answer was not compared ("" when it was)
    not_compared: str = ""


async def stream_pair(
    client: ChatClient,
    i: int,
    nonces: NonceBook,
    sink: list[RequestRecord],
    *,
    model: str,
    thinking: Thinking,
) -> PairOutcome | None:
    """One pair; None when the stream itself failed (counted with the suite's errors)."""
    rid = f"corruption-pair-{i}"
    body, expects = pair_body(i, nonces.issue(rid), model=model, thinking=thinking)
    rec, (reply, error) = await asyncio.gather(
        client.stream(body, rid=rid, tag="pair", sink=sink), client.whole(body)
    )
    if not rec.ok:
        return None
    problems = streamed_problems(rec, expects, nonces)
    if reply is None:
        return PairOutcome(rid, problems, f"the request not streamed failed: {error}")
    return PairOutcome(rid, problems + compare(rec.tool_calls, whole_calls(reply)))


def streamed_problems(
    rec: RequestRecord, expects: Sequence[ToolExpectation], nonces: NonceBook
) -> list[ToolProblem]:
    """The streamed calls against the expected ones: each call's checks, then the count (a
    parallel call lost or left without arguments), then the exact arguments."""
    problems = check_calls(
        rec.tool_calls,
        TOOL_SCHEMAS,
        expected_nonce=expects[0].nonce,
        known_nonces=nonces.owners,
        content=rec.content,
        finish_reason=rec.finish_reason,
    )
    calls = rec.tool_calls
    emptied = [c.index for c in calls[1:] if not c.arguments.strip()]
    if 0 < len(calls) < len(expects) or emptied:
        problems.append(
            ToolProblem(
                CALLS_IN_ONE_DELTA,
                f"{len(calls)} of {len(expects)} parallel calls streamed"
                + (f", call {emptied[0]} without arguments" if emptied else "")
                + " (sglang#37634: calls lost when one delta carries several)",
            )
        )
    if not problems:
        got = [(c.name, _parsed(c.arguments)) for c in calls]
        want = [(e.tool, e.args) for e in expects]
        if got != want:
            problems.append(ToolProblem(ARGS_MISMATCH, f"streamed {got!r:.160}, expected {want}"))
    return problems


def compare(streamed: Sequence[ToolCall], whole: Sequence[ToolCall]) -> list[ToolProblem]:
    """One `stream_mismatch` when the streamed calls differ from the whole answer's (by name
    and parsed arguments: key order and spacing are the parser's to choose)."""
    mine = [(c.name, _parsed(c.arguments)) for c in streamed]
    theirs = [(c.name, _parsed(c.arguments)) for c in whole]
    if mine == theirs:
        return []
    if len(mine) != len(theirs):
        detail = f"{len(mine)} calls streamed, {len(theirs)} not streamed"
    else:
        k = next(k for k, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b)
        detail = (
            f"call {k}: streamed {streamed[k].name} {streamed[k].arguments[:100]!r}, "
            f"not streamed {whole[k].name} {whole[k].arguments[:100]!r}"
        )
    return [ToolProblem(STREAM_MISMATCH, f"the same greedy request differs streamed: {detail}")]


def whole_calls(reply: JSONObject) -> list[ToolCall]:
    """The tool calls of a chat completion that was not streamed."""
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    message = first.get("message") if isinstance(first, dict) else None
    raw = message.get("tool_calls") if isinstance(message, dict) else None
    calls = []
    for k, c in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(c, dict):
            continue
        fn = c.get("function")
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments")
        calls.append(
            ToolCall(
                index=k,
                id=_str(c.get("id")),
                name=_str(fn.get("name")),
                arguments=args if isinstance(args, str) else "",
            )
        )
    return calls


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _parsed(arguments: str) -> object:
    """The arguments as JSON, or the text itself when it is not JSON (compared as text)."""
    try:
        value: object = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments
    return value
