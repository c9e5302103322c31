"""abort-cascade: cancel many in-flight streams at once, then check the server recovers.

Half the streams are cut by client disconnect, the rest by `POST /abort_request {"abort_all":
true}` on each worker (the router does not expose it). Recovery: running + queued back to the
pre-cascade baseline within `abort_cascade_recovery_s`, fresh probe requests served, and no
server-wide freeze — the seeds' overlap-scheduler TP-desync wedge appeared exactly here. Probes
start right after the cascade, so a wedge is caught by the watchdog in ~freeze_s, not after the
recovery bound.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dsv4ops.canary.sampler import scrape_once
from dsv4ops.canary.stats import summarize
from dsv4ops.canary.suites.common import (
    Harness,
    SuiteContext,
    cancel_all,
    harness,
    judge_client,
    judge_errors,
    reachable,
)
from dsv4ops.canary.verdict import Findings, SuiteResult
from dsv4ops.canary.watchdog import FREEZE, FREEZE_METRICS
from dsv4ops.canary.workload import base_body, text_prompt
from dsv4ops.errors import CanaryError

PROBES = 4


async def run_abort_cascade(ctx: SuiteContext) -> SuiteResult:
    th = ctx.thresholds
    n = ctx.concurrency or th.abort_streams
    f = Findings()
    async with harness(ctx, connections=n + PROBES, name="abort-cascade") as h:
        if not await reachable(h.client):
            raise CanaryError(f"cannot reach {ctx.base_url}", hint="check --url / the target's router")
        baseline = await _in_system(h)
        if baseline is None:
            f.unsure("worker metrics unavailable (pass --worker-url with --enable-metrics servers):"
                     " cannot check running/queued return to baseline")
        ctx.say(f"abort-cascade: starting {n} long streams")
        streams = [asyncio.create_task(h.client.stream(
            base_body([{"role": "user", "content": text_prompt(20_000 + i)}], max_tokens=4096,
                      model=ctx.model), rid=f"cascade-{i}", tag="cascade", sink=h.records))
            for i in range(n)]
        decoding = await _wait_decoding(h, n, timeout_s=min(th.first_token_deadline_s, 30.0))
        t_cascade = time.perf_counter_ns()
        ctx.say(f"abort-cascade: cancelling {n} streams ({decoding} decoding)")
        disconnect = streams if not ctx.worker_urls else streams[: n // 2]
        await cancel_all(disconnect)
        abort_status = await asyncio.gather(*(
            h.client.post_json(u.rstrip("/") + "/abort_request", {"rid": "", "abort_all": True})
            for u in ctx.worker_urls))
        await asyncio.sleep(0.2)
        probes = [asyncio.create_task(h.client.stream(
            base_body([{"role": "user", "content": text_prompt(30_000 + i)}], max_tokens=16,
                      model=ctx.model), rid=f"probe-{i}", tag="probe", sink=h.records))
            for i in range(PROBES)]
        recovery = asyncio.create_task(_recovered(h, baseline, th.abort_cascade_recovery_s))
        frozen = asyncio.create_task(h.watchdog.frozen.wait())
        work = asyncio.gather(recovery, *probes)
        await asyncio.wait([work, frozen], return_when=asyncio.FIRST_COMPLETED,
                           timeout=th.abort_cascade_recovery_s + th.freeze_s + 5)
        await cancel_all([*streams, *probes, recovery, frozen])
        await asyncio.gather(work, return_exceptions=True)  # retrieve, so nothing is left unread
        recovery_s = recovery.result() if recovery.done() and not recovery.cancelled() else None
    sc = h.selfcheck.report
    t_ms = lambda ns: (ns - t_cascade) / 1e9  # noqa: E731
    freezes = [e for e in h.watchdog.events if e.kind in (FREEZE, FREEZE_METRICS) and e.detected_ns > t_cascade]
    if freezes:
        e = freezes[0]
        f.fail(f"wedge: {e.detail}; detected {t_ms(e.detected_ns):.2f} s after the cascade "
               f"({e.detection_latency_s:.2f} s after the silence began)")
    probe_recs = [r for r in h.records if r.tag == "probe"]
    if not freezes:
        judge_errors(f, probe_recs, th, ignore=())
    if baseline is not None and recovery_s is None and not freezes:
        f.fail(f"running/queued requests did not return to baseline {baseline:.0f} within "
               f"{th.abort_cascade_recovery_s:.0f} s")
    if decoding < n // 4:
        f.unsure(f"only {decoding} of {n} streams were decoding when the cascade started")
    if ctx.worker_urls and not all(s == 200 for s in abort_status):
        f.note(f"/abort_request answered {abort_status}")
    judge_client(f, sc)
    f.note(f"{n} streams cancelled ({decoding} mid-decode); recovery "
           + (f"{recovery_s:.2f} s" if recovery_s is not None else "not measured"))
    metrics: dict[str, Any] = {
        "summary": summarize(probe_recs, duration_s=1.0, max_concurrency=PROBES),
        "cascade": {"streams": n, "decoding_at_cascade": decoding, "baseline_in_system": baseline,
                    "recovery_s": recovery_s, "abort_request_status": list(abort_status),
                    "wedge_detected_s": t_ms(freezes[0].detected_ns) if freezes else None},
        "hangs": h.watchdog.summary(),
        "client": sc.to_json(),
    }
    return f.result("abort-cascade", metrics)


async def _in_system(h: Harness) -> float | None:
    """running + queued summed over the workers; None when no worker exposes the gauges."""
    gauges = await asyncio.gather(*(scrape_once(h.client, u) for u in h.sampler.urls))
    got = [g for g in gauges if g is not None]
    return sum(g.in_system for g in got) if got else None


async def _wait_decoding(h: Harness, n: int, *, timeout_s: float) -> int:
    """Wait until most streams have output (mid-decode), leaving a few mid-prefill at most."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
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
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < bound_s:
        now = await _in_system(h)
        if now is not None and now <= baseline:
            return time.perf_counter() - t0
        await asyncio.sleep(0.1)
    return None
