"""abort-cascade: cancel many in-flight streams at once, then check the server recovers.

Half the streams are cut by client disconnect, the rest by `POST /abort_request {"rid": <id>,
"abort_all": false}` per stream on each worker (the router does not expose it). Never
`abort_all`: against a production box that would also abort every user's in-flight request.

Which id: each canary stream sends its own `rid` in the body, and the serving worker reports the
id it serves the stream under as the chunk `id` (SGLang sets it to the request's rid,
`serving_chat.py`). Which of the two reaches the decode depends on the router, and
`RouterKind.request_ids` says so (one place): SMG 1.13.0 keeps the rid, sglang-router 0.3.2 drops
it from chat bodies (the decode then serves its own `chatcmpl-…` id, which only the chunk tells).
With the router known (a deployment) the suite aborts by the id that reaches the worker, and says
so; a stream that shows otherwise (its chunk id against what is recorded for the router) is
aborted by both and named, and a stream with no id a worker can know is cut by disconnect
instead: INCONCLUSIVE, neither a PASS that did not abort by request nor the server's failure. With the router unknown
(`canary --url`) both ids are sent. An id a worker does not know is a no-op 200.

Recovery: running + queued back to the pre-cascade baseline within `abort_cascade_recovery_s`,
fresh probe requests served, and no server-wide freeze — the seeds' overlap-scheduler TP-desync
wedge appeared exactly here. Probes start right after the cascade, so a wedge is caught by the
watchdog in ~freeze_s, not after the recovery bound.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.sampler import scrape_once
from dsv4ops.canary.selfcheck import SelfCheckReport
from dsv4ops.canary.stats import summarize
from dsv4ops.canary.suites.common import (
    Harness,
    SuiteContext,
    cancel_all,
    harness,
    judge_client,
    judge_errors,
    judge_refusals,
    judge_workers,
    refused_by_server,
)
from dsv4ops.canary.verdict import Findings, Kind, SuiteResult, Thresholds
from dsv4ops.canary.watchdog import FREEZE, FREEZE_METRICS, HangEvent
from dsv4ops.canary.workload import base_body, text_prompt
from dsv4ops.clock import perf_ns, perf_s
from dsv4ops.jsontypes import JSONObject
from dsv4ops.routerkind import RouterKind

PROBES = 4
ABORT_GRACE_S = 1.0  # an aborted stream ends within a step or two; longer means it was not aborted


@dataclass(frozen=True)
class _Cascade:
    """What one cascade observed, judged once the harness has closed."""

    streams: int
    decoding: int  # streams with output when the cascade started
    baseline: float | None  # other clients' running + queued; None without worker metrics
    t_cascade_ns: int
    abort_ids: list[str]
    abort_by: str  # which id reached the workers: "rid", "chunk id" or "rid and chunk id"
    unaddressed: int  # streams meant for an abort by request with no id a worker knows
    unlike_recorded: int  # streams whose chunk id contradicts RouterKind.request_ids
    abort_status: list[int]
    by_disconnect: int
    by_request: int
    ended_by_abort: int  # of the by_request streams, those the server closed by itself
    recovery_s: float | None

    @property
    def statuses(self) -> dict[int, int]:
        return {st: self.abort_status.count(st) for st in sorted(set(self.abort_status))}

    def since_cascade_s(self, ns: int) -> float:
        return (ns - self.t_cascade_ns) / 1e9


async def run_abort_cascade(ctx: SuiteContext) -> SuiteResult:
    n = ctx.concurrency or ctx.thresholds.abort_streams
    f = Findings()
    # room for the streams, the probes and the burst of per-rid aborts without pool queueing (a
    # cascade is aborts landing together)
    async with harness(ctx, connections=2 * n + PROBES, name="abort-cascade") as h:
        cap = h.client.limits.max_running_requests
        if cap is not None and n > cap:
            # more streams than the server runs at once would wait in its queue, not decode
            f.note(f"{n} cascade streams cut to {cap}, the server's max running requests")
            n = cap
        baseline = await _in_system(h)
        if baseline is None:
            f.unsure(
                "worker metrics unavailable (pass --worker-url with --enable-metrics servers):"
                " cannot check running/queued return to baseline",
                Kind.NO_METRICS,
            )
        c = await _cascade(ctx, h, n, baseline)
    sc = h.selfcheck.report
    freezes = _judge(f, h, c, ctx.thresholds)
    judge_client(f, sc)
    judge_workers(f, h)
    if ctx.router is not None and c.by_request:
        f.note(f"aborted by {c.abort_by}: what {ctx.router.label} lets reach the workers")
    f.note(
        f"{n} streams cancelled ({c.decoding} mid-decode); recovery "
        + (f"{c.recovery_s:.2f} s" if c.recovery_s is not None else "not measured")
    )
    return f.result("abort-cascade", _metrics(h, c, freezes, sc))


async def _cascade(ctx: SuiteContext, h: Harness, n: int, baseline: float | None) -> _Cascade:
    """Open n long streams, cut them all at once (half by disconnect, half by POST
    /abort_request), then watch the probes and the recovery."""
    th = ctx.thresholds
    ctx.say(f"abort-cascade: starting {n} long streams")
    # unique per run: a rid must not collide with another client's (or another canary's)
    run_id = secrets.token_hex(4)
    streams = [
        asyncio.create_task(
            h.client.stream(
                {
                    **base_body(
                        [{"role": "user", "content": text_prompt(20_000 + i)}],
                        max_tokens=4096,
                        model=ctx.model,
                        thinking=th.thinking_mode(),
                    ),
                    "rid": f"canary-{run_id}-cascade-{i}",
                },
                rid=f"canary-{run_id}-cascade-{i}",
                tag="cascade",
                sink=h.records,
            )
        )
        for i in range(n)
    ]
    decoding = await _wait_decoding(h, n, timeout_s=min(th.first_token_deadline_s, 30.0))
    # SGLang publishes running/queued once per --decode-log-interval, so the scrape at the
    # start may predate other clients' requests; what the workers report now, minus our own
    # open streams, is a second (later) reading of the same baseline
    if baseline is not None:
        baseline = max(baseline, await _baseline_beside_ours(h))
    t_cascade = perf_ns()
    ctx.say(f"abort-cascade: cancelling {n} streams ({decoding} decoding)")
    half = n // 2 if ctx.worker_urls else n  # no worker URL: nowhere to POST an abort
    recs = {r.rid: r for r in h.records if r.tag == "cascade"}
    picked = {
        k: _request_ids(recs[f"canary-{run_id}-cascade-{k}"], ctx.router) for k in range(half, n)
    }
    abort_ids = sorted({i for ids, _ in picked.values() for i in ids})
    # a stream no worker knows an id for is cut by disconnect with the first half: left
    # streaming, it would hold running/queued above the baseline and read as a failed recovery
    no_id = {k for k, (ids, _) in picked.items() if not ids}
    disconnect = [t for k, t in enumerate(streams) if k < half or k in no_id]
    by_request = [t for k, t in enumerate(streams) if k >= half and k not in no_id]
    await cancel_all(disconnect)
    abort_status = await asyncio.gather(
        *(
            h.client.post_json(u.rstrip("/") + "/abort_request", {"rid": rid, "abort_all": False})
            for u in ctx.worker_urls
            for rid in abort_ids
        )
    )
    await asyncio.sleep(0.2)
    ended_by_abort, recovery_s = await _watch_recovery(ctx, h, baseline, streams, by_request)
    return _Cascade(
        streams=n,
        decoding=decoding,
        baseline=baseline,
        t_cascade_ns=t_cascade,
        abort_ids=abort_ids,
        abort_by=_abort_by(ctx.router),
        unaddressed=len(no_id),
        unlike_recorded=sum(1 for _, as_recorded in picked.values() if not as_recorded),
        abort_status=list(abort_status),
        by_disconnect=len(disconnect),
        by_request=len(by_request),
        ended_by_abort=ended_by_abort,
        recovery_s=recovery_s,
    )


async def _watch_recovery(
    ctx: SuiteContext,
    h: Harness,
    baseline: float | None,
    streams: Sequence[asyncio.Task[object]],
    by_request: Sequence[asyncio.Task[object]],
) -> tuple[int, float | None]:
    """Probe right after the cascade, until recovery or a freeze; then give the by-request
    streams a grace to end. (how many of them the server ended, seconds to recovery or None)"""
    th = ctx.thresholds
    probes = [
        asyncio.create_task(
            h.client.stream(
                base_body(
                    [{"role": "user", "content": text_prompt(30_000 + i)}],
                    max_tokens=16,
                    model=ctx.model,
                    thinking=th.thinking_mode(),
                ),
                rid=f"probe-{i}",
                tag="probe",
                sink=h.records,
            )
        )
        for i in range(PROBES)
    ]
    recovery = asyncio.create_task(_recovered(h, baseline, th.abort_cascade_recovery_s))
    frozen = asyncio.create_task(h.watchdog.frozen.wait())
    work = asyncio.gather(recovery, *probes)
    await asyncio.wait(
        (work, frozen),
        return_when=asyncio.FIRST_COMPLETED,
        timeout=th.abort_cascade_recovery_s + th.freeze_s + 5,
    )
    if by_request and not frozen.done():
        await asyncio.wait(by_request, timeout=ABORT_GRACE_S)
    # ended on their own (the server closed them) rather than cancelled below by us
    ended_by_abort = sum(1 for t in by_request if t.done())
    await cancel_all([*streams, *probes, recovery, frozen])
    await asyncio.gather(work, return_exceptions=True)  # retrieve, so nothing is left unread
    recovery_s = recovery.result() if recovery.done() and not recovery.cancelled() else None
    return ended_by_abort, recovery_s


def _judge(f: Findings, h: Harness, c: _Cascade, th: Thresholds) -> list[HangEvent]:
    """The server-side findings; returns the freezes detected after the cascade (a wedge
    explains the other symptoms, so they are not judged again)."""
    freezes = [
        e
        for e in h.watchdog.events
        if e.kind in (FREEZE, FREEZE_METRICS) and e.detected_ns > c.t_cascade_ns
    ]
    if freezes:
        e = freezes[0]
        f.fail(
            f"wedge: {e.detail}; detected {c.since_cascade_s(e.detected_ns):.2f} s after the cascade "
            f"({e.detection_latency_s:.2f} s after the silence began)",
            Kind.WEDGE,
        )
    refused = [r for r in h.records if r.tag == "cascade" and refused_by_server(r)]
    if refused:  # the cascade did not run as designed: say so, and judge none of its streams
        judge_refusals(f, refused, c.streams, max_rate=0.0)
    if not freezes:
        judge_errors(f, _probe_records(h), th, ignore=())
    if c.baseline is not None and c.recovery_s is None and not freezes:
        f.fail(
            f"running/queued requests did not return to baseline {c.baseline:.0f} within "
            f"{th.abort_cascade_recovery_s:.0f} s",
            Kind.NO_RECOVERY,
        )
    if c.decoding < c.streams // 4 and not refused:
        f.unsure(
            f"only {c.decoding} of {c.streams} streams were decoding when the cascade started",
            Kind.NOT_DECODING,
        )
    if c.abort_status and set(c.statuses) != {200}:
        f.note(f"/abort_request answered {c.statuses} (status: count)")
    if c.unlike_recorded:
        f.note(
            f"{c.unlike_recorded} streams were served under ids unlike what dsv4ops records for "
            "this router (routerkind.py RequestIds): aborted by both their rid and chunk id"
        )
    if c.unaddressed:  # the half meant to be aborted by request was not (all of it, or part)
        f.unsure(
            f"{c.unaddressed} of {c.unaddressed + c.by_request} streams could not be aborted by "
            "request (cut by disconnect instead): the router drops their rid and no chunk named "
            "the id the decode serves them under",
            Kind.UNADDRESSED,
        )
    if c.by_request and not freezes and not refused and c.ended_by_abort < c.by_request:
        f.fail(
            f"{c.by_request - c.ended_by_abort} of {c.by_request} streams kept streaming "
            f"{ABORT_GRACE_S:.0f} s after POST /abort_request with their ids "
            f"({len(c.abort_ids)} ids, by {c.abort_by}, sent to each worker)",
            Kind.ABORT_IGNORED,
        )
    return freezes


def _metrics(h: Harness, c: _Cascade, freezes: list[HangEvent], sc: SelfCheckReport) -> JSONObject:
    return {
        # the probes' own span (first sent → last ended): the rates are per second of probing
        "summary": summarize(_probe_records(h), max_concurrency=PROBES),
        "cascade": {
            "streams": c.streams,
            "refused": sum(1 for r in h.records if r.tag == "cascade" and refused_by_server(r)),
            "decoding_at_cascade": c.decoding,
            "baseline_in_system": c.baseline,
            "recovery_s": c.recovery_s,
            "abort_request_status": c.statuses,
            "aborted_by_disconnect": c.by_disconnect,
            "aborted_by_request": c.by_request,
            "abort_request_ids": len(c.abort_ids),
            "abort_by": c.abort_by,
            "abort_unaddressed": c.unaddressed,
            "ended_by_abort_request": c.ended_by_abort,
            "wedge_detected_s": c.since_cascade_s(freezes[0].detected_ns) if freezes else None,
        },
        "hangs": h.watchdog.summary(),
        "client": sc.to_json(),
    }


def _probe_records(h: Harness) -> list[RequestRecord]:
    return [r for r in h.records if r.tag == "probe"]


def _request_ids(rec: RequestRecord, router: RouterKind | None) -> tuple[list[str], bool]:
    """(the ids to abort this stream by, whether its chunk id agrees with what is recorded for
    the router). The router known: the id it lets reach the decode (`RouterKind.request_ids`),
    plus the chunk id where the stream shows otherwise; unknown: the rid and the chunk id."""
    chunk = _chunk_id(rec)
    if router is None:
        return list(dict.fromkeys(i for i in (rec.rid, chunk) if i)), True
    kept = router.request_ids.chat_rid_kept
    ids = [rec.rid] if kept else [chunk] if chunk else []
    as_recorded = chunk is None or (chunk == rec.rid) == kept
    if not as_recorded:  # this router did not do what is recorded for it: reach it either way
        ids += [rec.rid, chunk or rec.rid]
    return list(dict.fromkeys(ids)), as_recorded


def _abort_by(router: RouterKind | None) -> str:
    if router is None:
        return "rid and chunk id"
    return "rid" if router.request_ids.chat_rid_kept else "chunk id"


def _chunk_id(rec: RequestRecord) -> str | None:
    """The id the serving worker names the stream by: the first chunk `id` received so far.
    Parsed here, off the hot path, from the raw events."""
    for payload in rec.payloads:
        try:
            obj = json.loads(payload)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str) and obj["id"]:
            return str(obj["id"])
    return None


async def _in_system(h: Harness) -> float | None:
    """running + queued summed over the workers; None when no worker exposes the gauges."""
    gauges = await asyncio.gather(*(scrape_once(h.client, u) for u in h.sampler.urls))
    got = [g for g in gauges if g is not None]
    return sum(g.in_system for g in got) if got else None


async def _baseline_beside_ours(h: Harness, wait_s: float = 5.0) -> float:
    """Other clients' running + queued, read once the workers' report includes our streams."""
    deadline = perf_s() + wait_s
    while True:
        now = await _in_system(h)
        ours = sum(1 for r in h.records if r.tag == "cascade" and r.t_first and not r.t_end)
        if now is not None and (now >= ours or perf_s() > deadline):
            return max(now - ours, 0.0)
        if now is None:
            return 0.0
        await asyncio.sleep(0.1)


async def _wait_decoding(h: Harness, n: int, *, timeout_s: float) -> int:
    """Wait until most streams have output (mid-decode), leaving a few mid-prefill at most."""
    deadline = perf_s() + timeout_s
    while perf_s() < deadline:
        decoding = sum(1 for r in h.records if r.tag == "cascade" and r.t_first and not r.t_end)
        if decoding >= max(1, (3 * n) // 4):
            await asyncio.sleep(0.2)  # let a few more tokens flow: cut mid-decode, not at token 1
            break
        await asyncio.sleep(0.05)
    return sum(1 for r in h.records if r.tag == "cascade" and r.t_first and not r.t_end)


async def _recovered(h: Harness, baseline: float | None, bound_s: float) -> float | None:
    """Seconds until running + queued ≤ baseline (None without metrics or past the bound)."""
    if baseline is None:
        return None
    t0 = perf_s()
    while perf_s() - t0 < bound_s:
        now = await _in_system(h)
        if now is not None and now <= baseline:
            return perf_s() - t0
        await asyncio.sleep(0.1)
    return None
