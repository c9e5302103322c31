"""smoke and soak: closed-loop load of plain and tool-call requests, judged on errors, hangs,
tool-call validity, latency thresholds and (soak) throughput that holds up over time."""

from __future__ import annotations

from dsv4ops.canary.loadgen import closed_loop, poisson
from dsv4ops.canary.stats import SteadyWindow, steady_window, summarize
from dsv4ops.canary.suites.common import (
    Harness,
    SuiteContext,
    harness,
    judge_client,
    judge_latency,
    judge_streams,
    judge_tools,
    judge_workers,
    tool_problems,
)
from dsv4ops.canary.verdict import Findings, Kind, SuiteResult
from dsv4ops.canary.workload import Mix
from dsv4ops.clock import perf_s
from dsv4ops.jsontypes import JSONObject


async def run_smoke(ctx: SuiteContext) -> SuiteResult:
    th = ctx.thresholds
    concurrency = ctx.concurrency or th.smoke_concurrency
    n = None if ctx.duration_s else max(th.smoke_requests, concurrency)
    return await _run_mix(
        ctx,
        "smoke",
        concurrency=concurrency,
        num_requests=n,
        duration_s=ctx.duration_s,
        tool_every=2,
    )


async def run_soak(ctx: SuiteContext) -> SuiteResult:
    th = ctx.thresholds
    return await _run_mix(
        ctx,
        "soak",
        concurrency=ctx.concurrency or th.soak_concurrency,
        num_requests=None,
        duration_s=ctx.duration_s or th.stress_duration_s,
        tool_every=4,
        check_decay=True,
    )


async def _run_mix(
    ctx: SuiteContext,
    name: str,
    *,
    concurrency: int,
    num_requests: int | None,
    duration_s: float | None,
    tool_every: int,
    check_decay: bool = False,
) -> SuiteResult:
    th = ctx.thresholds
    mix = Mix(
        prefix=name,
        max_tokens=th.max_tokens,
        model=ctx.model,
        tool_every=tool_every if th.tool_calls else 0,
        thinking=th.thinking_mode(),
    )
    async with harness(ctx, connections=concurrency, name=name) as h:
        elapsed = await _drive(
            h,
            ctx,
            mix,
            name,
            concurrency=concurrency,
            num_requests=num_requests,
            duration_s=duration_s,
        )
    sc = h.selfcheck.report
    summary = summarize(h.records, duration_s=elapsed, max_concurrency=concurrency, t0_ns=h.t0_ns)
    problems = {
        rid: tool_problems(rec, mix.expect[rid], mix.nonces)
        for rec in h.records
        if (rid := rec.rid) in mix.expect and rec.ok
    }
    f = Findings()
    judge_streams(f, h, th)
    judge_workers(f, h)
    judge_tools(f, problems, len(problems), th)
    judge_client(f, sc)
    judge_latency(f, summary, th, client_bound=bool(sc.problems))
    steady = (
        steady_window(h.records, h.t0_ns, concurrency, open_loop=bool(ctx.rate_per_s))
        if check_decay
        else None
    )
    if steady is not None:
        _judge_decay(f, steady, client_bound=bool(sc.problems))
    if not h.sampler.available and ctx.worker_urls:
        f.note("worker metrics unavailable: server-side freeze detection off")
    if off := th.tool_calls_off_reason():
        f.note(off)
    metrics: JSONObject = {
        "summary": summary,
        "hangs": h.watchdog.summary(),
        "tool_calls": {
            "checked": len(problems),
            "bad": {rid: [str(p) for p in ps] for rid, ps in problems.items() if ps},
        },
        "client": sc.to_json(),
    }
    if steady is not None:
        metrics["steady_window"] = {
            "ramp_s": steady.ramp_s,
            "drain_s": steady.drain_s,
            "seconds": len(steady.buckets),
        }
    f.note(
        f"{summary['completed']} requests, output {summary['output_throughput']:.0f} tok/s, "
        f"TTFT p99 {summary['p99_ttft_ms']:.0f} ms, ITL p99 {summary['p99_itl_ms']:.1f} ms"
    )
    return f.result(name, metrics)


async def _drive(
    h: Harness,
    ctx: SuiteContext,
    mix: Mix,
    name: str,
    *,
    concurrency: int,
    num_requests: int | None,
    duration_s: float | None,
) -> float:
    """The load itself: Poisson arrivals at --rate (capped at `concurrency`), else closed-loop
    streams until the count, the duration or a frozen decode; returns the seconds it ran."""
    t0 = perf_s()
    if ctx.rate_per_s:
        n = num_requests or max(1, round(ctx.rate_per_s * (duration_s or 10.0)))
        ctx.say(
            f"{name}: Poisson arrivals at {ctx.rate_per_s:g}/s, {n} requests, cap {concurrency}"
        )
        h.records.extend(
            await poisson(
                h.client,
                mix,
                rate_per_s=ctx.rate_per_s,
                num_requests=n,
                max_concurrency=concurrency,
                tag=name,
            )
        )
    else:
        ctx.say(
            f"{name}: {concurrency} streams, "
            + (f"{num_requests} requests" if num_requests else f"{duration_s:.0f} s")
        )
        await closed_loop(
            h.client,
            mix,
            concurrency=concurrency,
            num_requests=num_requests,
            duration_s=duration_s,
            tag=name,
            sink=h.records,
            stop=h.watchdog.frozen,
        )
    return perf_s() - t0


MIN_STEADY_S = 4  # seconds at full load: a first and a last third of at least one second each


def _judge_decay(f: Findings, steady: SteadyWindow, *, client_bound: bool = False) -> None:
    """Soak: the last third's throughput must hold at least half of the first third's, both
    inside the load's steady window (its measured ramp and drain tail are not the load). The
    buckets are the client's receipt times: when its own event loop lagged (client_bound) they
    bunch and gap with the client, not the server, so a fall is INCONCLUSIVE, never a FAIL (as
    judge_latency does with the percentiles)."""
    buckets = steady.buckets
    where = (
        f"(the ramp and first cycle's {steady.ramp_s} s and the drain's last "
        f"{steady.drain_s} s left out)"
    )
    if len(buckets) < MIN_STEADY_S:
        f.unsure(
            f"soak too short to judge stability: {len(buckets)} s at full load {where}",
            Kind.TOO_SHORT,
        )
        return
    third = len(buckets) // 3
    first = sum(buckets[:third]) / third
    last = sum(buckets[-third:]) / third
    if first > 0 and last < 0.5 * first:
        line = f"throughput decayed from {first:.0f} to {last:.0f} tok/s over the soak {where}"
        (f.unsure if client_bound else f.fail)(
            line + (" (client-bound)" if client_bound else ""), Kind.DECAY
        )
