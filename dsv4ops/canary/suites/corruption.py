"""corruption: the seeds' 80-session agentic stress plus an output-consistency check.

Each session is what an agent harness does: send the tools, get a streamed tool call, validate it
(JSON, schema, this request's nonce, the exact arguments), append the call and a tool result, and
continue. The multi-stream-overlap race in the seeds showed up only at high concurrency, through
SGLang's deepseekv4 parser, as missing calls, another request's values inside valid JSON
(cross-talk: every argument carries this request's nonce) and DSML markup in `content`. A model
that made no call in any request is reported as that (tools not enabled or the wrong parser), not
as corruption; a call cut by max_tokens (reasoning used the budget) is INCONCLUSIVE, not corrupt.
Consistency: the same greedy prompts at concurrency 1 and under the load must agree (exactly for
the twin; `consistency_min_agreement` for a real model). Stream pairs (canary/streampair.py): one
per PAIR_EVERY sessions once the first turn ended, two parallel calls with nested arrays and long
arguments, streamed and not streamed under the load and compared: the streaming-only corruption
of 2026.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TypeVar

from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.stats import summarize
from dsv4ops.canary.streampair import PairOutcome, stream_pair
from dsv4ops.canary.suites.common import (
    Harness,
    SuiteContext,
    cancel_all,
    harness,
    judge_client,
    judge_streams,
    judge_tools,
    judge_workers,
    tool_problems,
)
from dsv4ops.canary.toolcalls import CUT_BY_MAX_TOKENS, MARKUP_IN_CONTENT, ToolProblem
from dsv4ops.canary.verdict import Findings, Kind, SuiteResult, Thresholds
from dsv4ops.canary.workload import (
    Message,
    NonceBook,
    append_tool_turn,
    base_body,
    session_turn_body,
    text_prompt,
)
from dsv4ops.clock import perf_s
from dsv4ops.jsontypes import JSONObject

GARBLED = "\ufffd"
T = TypeVar("T")
# One stream pair per this many sessions (at least one): a sample, each pair is two requests
# with the suite's longest answers. At 80 sessions x 3 turns (3 pairs) the suite took 3-5 %
# longer on the twin (8.45 -> 8.66-8.88 s, scale 0.3, 2026-12-06); with pairs sent at the start,
# one per 16 sessions and twice as long, it took 12 % longer.
PAIR_EVERY = 24


async def run_corruption(ctx: SuiteContext) -> SuiteResult:
    th = ctx.thresholds
    if off := th.tool_calls_off_reason():
        # every request of this suite is a tool call: nothing to judge, and no PASS without it
        f = Findings()
        f.unsure(off, Kind.SKIPPED)
        return f.result("corruption", {})
    sessions = ctx.concurrency or th.stress_concurrency
    nonces = NonceBook()
    problems: dict[str, list[ToolProblem]] = {}
    # A parser that sends a call only when its DSML closes leaves the stream silent until then:
    # allow that before calling a hang (none for deepseek-recipe's streaming, 0.5.23's deepseekv4)
    silence = th.tool_call_silence()
    quiet = dataclasses.replace(
        ctx,
        thresholds=th.model_copy(
            update={
                "stall_s": max(th.stall_s, silence),
                "freeze_s": max(th.freeze_s, silence),
                "first_token_deadline_s": max(th.first_token_deadline_s, silence),
            }
        ),
    )
    async with harness(
        quiet, connections=sessions + th.consistency_prompts, name="corruption"
    ) as h:
        ctx.say(f"corruption: {th.consistency_prompts} reference prompts at concurrency 1")
        reference = [await _consistency(h, ctx, i, "ref") for i in range(th.consistency_prompts)]
        ctx.say(f"corruption: {sessions} agentic sessions x {th.corruption_turns}+ turns")
        loaded, pairs, elapsed = await _under_load(h, ctx, sessions, nonces, problems)
    sc = h.selfcheck.report
    load_records = [r for r in h.records if r.tag != "ref"]
    summary = summarize(load_records, duration_s=elapsed, max_concurrency=sessions, t0_ns=h.t0_ns)
    f = Findings()
    judge_streams(f, h, th)
    judge_workers(f, h)
    pair_metrics = _judge_pairs(f, pairs, problems)
    _judge_calls(f, problems, h.records, th)
    agreement, diffs = _agreement(reference, loaded)
    if agreement is None:
        # no prompt answered both alone and under load (the decode down, every request
        # refused): nothing to compare, which says neither consistent nor not
        f.unsure("no consistency prompt completed both at concurrency 1 and under load", Kind.BLIND)
    elif agreement < th.consistency_min_agreement:
        f.fail(
            f"output consistency {agreement:.0%} < {th.consistency_min_agreement:.0%} between "
            f"concurrency 1 and {sessions}; first: {diffs[0]}",
            Kind.INCONSISTENT,
        )
    garbled = [r.rid for r in h.records if GARBLED in r.content]
    if garbled:
        f.fail(
            f"garbled output (U+FFFD) in {len(garbled)} responses, e.g. {garbled[0]}", Kind.GARBLED
        )
    judge_client(f, sc)
    if not problems:
        f.unsure("no tool call was checked", Kind.BLIND)
    f.note(
        f"{len(problems)} tool calls checked in {sessions} sessions and "
        f"{pair_metrics['compared']} stream pairs; consistency "
        + ("not measured" if agreement is None else f"{agreement:.0%} over {len(loaded)} prompts")
    )
    metrics: JSONObject = {
        "summary": summary,
        "hangs": h.watchdog.summary(),
        "tool_calls": {
            "checked": len(problems),
            "bad": {rid: [str(p) for p in ps] for rid, ps in problems.items() if ps},
        },
        "consistency": {"agreement": agreement, "prompts": len(loaded), "diffs": diffs[:5]},
        "stream_pairs": pair_metrics,
        "client": sc.to_json(),
    }
    return f.result("corruption", metrics)


def _judge_pairs(
    f: Findings, pairs: list[PairOutcome | None], problems: dict[str, list[ToolProblem]]
) -> JSONObject:
    """The pairs' streamed calls join the suite's tool calls (judged with them); a suite whose
    pairs were none of them compared cannot PASS on the streaming-only shapes."""
    done = [p for p in pairs if p is not None]
    for p in done:
        problems[p.rid] = p.problems
    compared = [p for p in done if not p.not_compared]
    if pairs and not compared:
        why = next((p.not_compared for p in done), "their streams failed")
        f.unsure(f"no stream pair was compared streamed and not streamed: {why}", Kind.BLIND)
    return {
        "sent": len(pairs),
        "compared": len(compared),
        "not_compared": [f"{p.rid}: {p.not_compared}" for p in done if p.not_compared][:5],
    }


def _judge_calls(
    f: Findings,
    problems: dict[str, list[ToolProblem]],
    records: list[RequestRecord],
    th: Thresholds,
) -> None:
    """No call in any request → say so (not corruption); calls cut by max_tokens → INCONCLUSIVE;
    the rest is judged as corruption."""
    sessions = [r for r in records if r.tag == "session" and r.rid in problems]
    if problems and not any(r.tool_calls for r in sessions):
        markup = sum(1 for ps in problems.values() if any(p.kind == MARKUP_IN_CONTENT for p in ps))
        f.fail(
            f"model made no tool calls in any of {len(problems)} tool-call requests: tools not "
            "enabled / wrong parser? (SGLang needs --tool-call-parser deepseekv4)"
            + (f"; {markup} responses carry tool-call markup in content" if markup else ""),
            Kind.NO_TOOL_CALLS,
        )
        return
    cut = [
        rid for rid, ps in problems.items() if ps and all(p.kind == CUT_BY_MAX_TOKENS for p in ps)
    ]
    if cut:
        reasoning = max((len(r.reasoning) for r in sessions if r.rid in cut), default=0)
        f.unsure(
            f"{len(cut)} tool-call requests reached max_tokens before their call (first "
            f"{cut[0]}; up to {reasoning} chars of reasoning): raise "
            "canary.thinking_budget_tokens",
            Kind.THINKING_BUDGET,
        )
    judged = {rid: ps for rid, ps in problems.items() if rid not in cut}
    judge_tools(f, judged, len(judged), th)


async def _under_load(
    h: Harness,
    ctx: SuiteContext,
    sessions: int,
    nonces: NonceBook,
    problems: dict[str, list[ToolProblem]],
) -> tuple[list[RequestRecord], list[PairOutcome | None], float]:
    """The agentic sessions with the greedy consistency prompts again and the stream pairs while
    all are in flight, until they end or the watchdog sees the decode frozen; returns the
    prompts' records and the pairs (empty when they did not complete) and the seconds it took."""
    th = ctx.thresholds
    t0 = perf_s()
    deadline = t0 + ctx.duration_s if ctx.duration_s else None
    warm = asyncio.Event()  # a session's first turn ended: the load is all in the batch
    tasks = [
        asyncio.create_task(_session(h, ctx, s, nonces, problems, deadline, warm))
        for s in range(sessions)
    ]
    # the same greedy prompts again, while all sessions are in flight
    await asyncio.sleep(0)
    loaded_task = asyncio.gather(
        *(_consistency(h, ctx, i, "load") for i in range(th.consistency_prompts))
    )
    pairs_task = asyncio.ensure_future(_pairs(h, ctx, sessions, nonces, warm))
    frozen = asyncio.create_task(h.watchdog.frozen.wait())
    body = asyncio.gather(*tasks, loaded_task, pairs_task)
    await asyncio.wait((body, frozen), return_when=asyncio.FIRST_COMPLETED)
    if not body.done():
        await cancel_all(tasks)
        loaded_task.cancel()
        pairs_task.cancel()
    await asyncio.gather(body, return_exceptions=True)
    frozen.cancel()
    loaded = _result(loaded_task)
    elapsed = perf_s() - t0
    return loaded, _result(pairs_task), elapsed


async def _pairs(
    h: Harness, ctx: SuiteContext, sessions: int, nonces: NonceBook, warm: asyncio.Event
) -> list[PairOutcome | None]:
    """The stream pairs, once the sessions' load is in the batch: sent with the sessions'
    first requests, a pair could join before most of them (connections open in any order)
    and run below the load the streaming bugs need (16 and more, vllm#48089)."""
    await warm.wait()
    think = ctx.thresholds.thinking_mode()
    return await asyncio.gather(
        *(
            stream_pair(h.client, i, nonces, h.records, model=ctx.model, thinking=think)
            for i in range(max(1, sessions // PAIR_EVERY))
        )
    )


def _result(task: asyncio.Future[list[T]]) -> list[T]:
    """A finished gather's results; empty when it was cut."""
    return task.result() if task.done() and not task.cancelled() else []


async def _consistency(h: Harness, ctx: SuiteContext, i: int, tag: str) -> RequestRecord:
    body = base_body(
        [{"role": "user", "content": text_prompt(10_000 + i)}],
        max_tokens=32,
        model=ctx.model,
        thinking=ctx.thresholds.thinking_mode(),
    )
    return await h.client.stream(body, rid=f"consistency-{tag}-{i}", tag=tag, sink=h.records)


def _agreement(
    ref: list[RequestRecord], loaded: list[RequestRecord]
) -> tuple[float | None, list[str]]:
    """The share of prompts answered alike alone and under load, and how the others differ;
    None when no prompt was answered both times (not 0: nothing was compared)."""
    pairs = [(a, b) for a, b in zip(ref, loaded, strict=False) if a.ok and b.ok]
    if not pairs:
        return None, []
    diffs = [
        f"{b.rid}: {(a.reasoning + a.content)[:40]!r} vs {(b.reasoning + b.content)[:40]!r}"
        for a, b in pairs
        if (a.reasoning, a.content) != (b.reasoning, b.content)
    ]
    return 1.0 - len(diffs) / len(pairs), diffs


async def _session(
    h: Harness,
    ctx: SuiteContext,
    s: int,
    nonces: NonceBook,
    problems: dict[str, list[ToolProblem]],
    deadline: float | None,
    warm: asyncio.Event,
) -> None:
    client: ChatClient = h.client
    history: list[Message] = [
        {"role": "system", "content": "You are a coding agent. Use the tools exactly as asked."}
    ]
    session = f"s{s:03d}"
    step = 0
    while step < ctx.thresholds.corruption_turns or (deadline and perf_s() < deadline):
        rid = f"corruption-{session}-{step}"
        body, expect = session_turn_body(
            history,
            session,
            step,
            nonces.issue(rid),
            model=ctx.model,
            thinking=ctx.thresholds.thinking_mode(),
        )
        rec = await client.stream(body, rid=rid, tag="session", sink=h.records)
        warm.set()
        if not rec.ok:
            return  # counted as an error; an agent would stop here too
        found = tool_problems(rec, expect, nonces)
        problems[rid] = found
        if found or not rec.tool_calls:
            return
        call = rec.tool_calls[0]
        append_tool_turn(
            history,
            call.id or f"call_{rid}",
            call.name or "",
            call.arguments,
            f'{{"ok": true, "step": {step}}}',
        )
        step += 1
