"""sweep: a concurrency staircase, the step-time law and the CUDA-graph bucket sawtooth.

Workers are added level by level (no drain between levels), each level's first 30% is warm-up.
Per level: step time = median over streams of their token rate in the window (each stream gets
one token per decode step), and
from the server's metrics `1000 · running / gen_throughput` when exposed; output tok/s over the
window. Fit `step = a + b·bs` (against the padded batch when the buckets are known), report a, b,
R², the ceiling 1000/b, drops at bucket boundaries, and the padding waste per bucket.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from dsv4ops.canary.fit import (
    LevelPoint,
    mean_ci95,
)
from dsv4ops.canary.loadgen import closed_loop, level_windows
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.stats import percentile, summarize
from dsv4ops.canary.suites.common import (
    Harness,
    SuiteContext,
    harness,
    judge_client,
    judge_streams,
    judge_workers,
)
from dsv4ops.canary.suites.sweep_law import (
    MIN_LAW_LEVELS,
    fit_laws,
    judge_against_law,
    lawful,
    primary_law,
)
from dsv4ops.canary.timescale import clock_label, clock_record, server_time_scale, to_model_time
from dsv4ops.canary.verdict import Findings, Kind, SuiteResult
from dsv4ops.canary.workload import Mix
from dsv4ops.clock import perf_ns
from dsv4ops.jsontypes import JSONObject
from dsv4ops.metrics.prom import ServerGauges

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32, 48, 64)
# A level's window is cut in this many slices to measure its tok/s noise (its CI).
SLICES = 5


def sweep_levels(ctx: SuiteContext) -> list[int]:
    levels = sorted(set(ctx.thresholds.sweep_concurrency)) or list(DEFAULT_LEVELS)
    if ctx.concurrency:
        levels = [c for c in levels if c <= ctx.concurrency] or [ctx.concurrency]
    return levels


async def run_sweep(ctx: SuiteContext) -> SuiteResult:
    th = ctx.thresholds
    levels = sweep_levels(ctx)
    level_s = (ctx.duration_s / len(levels)) if ctx.duration_s else th.sweep_level_s
    mix = Mix(
        prefix="sweep", max_tokens=th.sweep_max_tokens, model=ctx.model, thinking=th.thinking_mode()
    )
    async with harness(ctx, connections=levels[-1], name="sweep") as h:
        starts, end, drained = await _staircase(ctx, h, mix, levels, level_s)
        scale = await server_time_scale(h.client, h.sampler.decode_url())
    sc = h.selfcheck.report
    metrics_ci: dict[int, tuple[tuple[float, float] | None, int]] = {}
    points = [
        to_model_time(p, scale)
        for p in _level_points(h, levels, level_windows(starts, end), metrics_ci)
    ]
    f = Findings()
    # long requests may all still be running when the staircase ends: they are cut, not failed
    judge_streams(f, h, th, require_completed=False)
    judge_workers(f, h)
    judge_client(f, sc)
    # The whole run, drain included: the streams still open when the staircase ends deliver
    # tokens (all counted) until they finish or are cut, so the duration must cover that too.
    summary = summarize(
        h.records, duration_s=(drained - starts[0]) / 1e9, max_concurrency=levels[-1], t0_ns=h.t0_ns
    )
    if summary["cancelled"]:
        f.note(
            f"{summary['cancelled']} streams still open when the staircase ended were cancelled "
            "(not failures; their tokens are counted)"
        )
    metrics: JSONObject = {
        "summary": summary,
        "levels": [p.__dict__ for p in points],
        "buckets": list(ctx.buckets),
        # the DSV4 decode graph width follows it (sglang#40442): a law holds at this context only
        "decode_context": h.client.limits.decode_context(),
        "hangs": h.watchdog.summary(),
        "client": sc.to_json(),
    }
    fits, not_laws = lawful(fit_laws(points, ctx.buckets))
    clock = clock_label(scale)
    metrics["clock"] = clock_record(scale)
    metrics["summary_clock"] = "client wall"  # bench_serving's keys, as its own tool has them
    # Only laws are reported as fits (buckets plan and the A/B read `fit`); the rest say why not.
    metrics["fit"] = {k: {**v.to_json(), "clock": clock} for k, v in fits.items()}
    if not_laws:
        metrics["fit_rejected"] = dict(not_laws)
    # The server's own accounting when it has every level, else the token law (primary_law).
    law, server_side, partial = primary_law(fits, points)
    judged = (
        [
            replace(
                p,
                step_ms=p.step_ms_metrics or 0.0,
                output_tok_s=p.output_tok_s_metrics or 0.0,
                **_server_noise(p, metrics_ci),
            )
            for p in points
        ]
        if server_side
        else points
    )  # server_side: both are set (> 0)
    metrics["law_source"] = "server metrics" if server_side else "token timestamps"
    if law is None and len(levels) < MIN_LAW_LEVELS:
        _judge_without_law(f, len(levels), len(points), summary)
        return f.result("sweep", metrics)
    if law is None:
        why = "; ".join(f"{k}: {v}" for k, v in {**not_laws, **partial}.items()) or (
            f"{len(points)} level(s) with output"
        )
        f.unsure(f"no step law from this sweep ({why})", Kind.NO_STEP_LAW)
        return f.result("sweep", metrics)
    judge_against_law(f, metrics, law, judged, ctx, clock)
    return f.result("sweep", metrics)


def _judge_without_law(f: Findings, asked: int, measured: int, summary: JSONObject) -> None:
    """Fewer levels asked than a law needs (an A/B's two): what was asked, the throughput at
    each level served cleanly, is judged; the law was never on offer. A level without output is
    no evidence of anything (60 streams held without a token are not a PASS)."""
    if measured < asked:
        f.unsure(
            f"only {measured} of {asked} concurrency levels produced output "
            f"({summary['total_output_tokens']} tokens in all)",
            Kind.BLIND,
        )
    f.note(
        f"no step law: {asked} level(s) asked, a law needs {MIN_LAW_LEVELS} "
        "(a line through two fits them by construction)"
    )


async def _staircase(
    ctx: SuiteContext, h: Harness, mix: Mix, levels: list[int], level_s: float
) -> tuple[list[int], int, int]:
    """Run the levels; returns their start times, the staircase's end and the drain's end (ns)."""
    stop = asyncio.Event()
    ids = itertools.count()
    workers: list[asyncio.Task[object]] = []
    starts: list[int] = []
    running = 0
    for level in levels:
        starts.append(perf_ns())
        ctx.say(f"sweep: level {level} for {level_s:.1f} s")
        workers += [
            asyncio.create_task(
                closed_loop(
                    h.client,
                    mix,
                    concurrency=1,
                    duration_s=1e9,
                    tag=f"c{level}",
                    stop=stop,
                    sink=h.records,
                    counter=ids,
                )
            )
            for _ in range(level - running)
        ]
        running = level
        try:
            await asyncio.wait_for(h.watchdog.frozen.wait(), timeout=level_s)
            break  # frozen: stop climbing
        except TimeoutError:
            pass
    end = perf_ns()
    stop.set()
    # Drain what is in flight, but not for longer than a level: the rest is cut (and ignored).
    _, pending = await asyncio.wait(workers, timeout=max(level_s, 3.0))
    for task in pending:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
    return starts, end, perf_ns()


def _level_points(
    h: Harness,
    levels: list[int],
    windows: list[tuple[float, float]],
    metrics_ci: dict[int, tuple[tuple[float, float] | None, int]] | None = None,
) -> list[LevelPoint]:
    """The levels as the client measured them; `metrics_ci` gets each level's CI of the server's
    gen_throughput reports (the noise of output_tok_s_metrics)."""
    decode = h.sampler.decode_url()
    metrics_ci = {} if metrics_ci is None else metrics_ci
    points: list[LevelPoint] = []
    # The step time from streams that ran normally (cut ones too: their tokens came before the
    # cut); a level's tok/s from every token received in its window, whatever its stream's end.
    timed = [r for r in h.records if r.ok or r.cancelled]
    for level, (a, b) in zip(levels, windows, strict=False):
        step = _stream_step_ms(timed, a, b, min_streams=min(2, level))
        tokens = sum(1 for r in h.records for t in r.token_times if a <= t <= b)
        if step is None:
            continue
        step_metrics = tput_metrics = None
        g: list[tuple[float, float]] = []
        bs = float(level)
        if decode is not None:
            window = h.sampler.window(decode, int(a), int(b))
            bs = _level_batch(window, level)
            g = _distinct_reports(
                (float(x.running), float(x.gen_throughput))
                for x in _whole_interval_reports(window)
                if x.gen_throughput and x.running
            )
            if g:
                step_metrics = statistics.median(1000.0 * run / tput for run, tput in g)
                tput_metrics = statistics.median(tput for _, tput in g)
        points.append(
            LevelPoint(
                concurrency=level,
                bs=bs,
                step_ms=step,
                output_tok_s=tokens / ((b - a) / 1e9),
                step_ms_metrics=step_metrics,
                output_tok_s_metrics=tput_metrics,
                **_level_latency(timed, a, b),
                output_tok_s_ci=_slices_ci(h.records, a, b),
                output_tok_s_n=SLICES,
            )
        )
        metrics_ci[level] = (mean_ci95([tput for _, tput in g]), len(g)) if g else (None, 0)
    return points


def _level_batch(window: list[ServerGauges], concurrency: int) -> float:
    """The batch a level ran at: the running count most of the decode's reports in its window
    give, a tie going to the one nearest the level's concurrency; the concurrency without any.

    The server's count beats the client's nominal one (a --max-running-requests cap, other
    traffic), but each report is the batch of the one decode step that logged it (one in
    --decode-log-interval). A router health probe on the decode (a 1-token generation, every
    --health-check-interval-secs) in that step makes the report one above the batch of the
    other steps. A median over scrapes counted such a report as often as it was read and once
    labelled a c57 level 58 (a full run's sweep test); at c56 the same would put the level in
    the next graph (57 pads to 64) and hide the sawtooth the sweep is there to find."""
    runs = Counter(
        run
        for run, _ in _distinct_reports(
            (x.running, x.gen_throughput or 0.0) for x in window if x.running is not None
        )
    )
    if not runs:
        return float(concurrency)
    most = max(runs.values())
    tied = [v for v, n in runs.items() if n == most]
    return min(tied, key=lambda v: (abs(v - concurrency), v))


def _server_noise(
    p: LevelPoint,
    metrics_ci: dict[int, tuple[tuple[float, float] | None, int]],
) -> JSONObject:
    """The noise of a level's server-side tok/s: the CI of its own reports when it has three or
    more, else the client's slices (the same throughput, on the same model clock): a level of a
    few log intervals has too few whole-interval reports to say."""
    ci, n = metrics_ci.get(p.concurrency, (None, 0))
    if ci is None or n < 3:
        ci, n = p.output_tok_s_ci, p.output_tok_s_n
    return {"output_tok_s_ci": ci, "output_tok_s_n": n}


def _slices_ci(records: list[RequestRecord], a: float, b: float) -> tuple[float, float] | None:
    """The level's tok/s noise: its window cut in SLICES equal slices, the 95% CI of their mean."""
    width = (b - a) / SLICES
    counts = [0] * SLICES
    for r in records:
        for t in r.token_times:
            if a <= t < b:
                counts[min(SLICES - 1, int((t - a) // width))] += 1
    return mean_ci95([c / (width / 1e9) for c in counts]) if width > 0 else None


def _level_latency(records: list[RequestRecord], a: float, b: float) -> dict[str, float | None]:
    """TTFT p50/p99 of the requests sent in [a, b] and ITL p50/p99 of the gaps inside it (ms)."""
    ttft = [r.ttft_s * 1e3 for r in records if a <= r.t_send <= b and r.ttft_s is not None]
    itl = [
        (t[i] - t[i - 1]) / 1e6
        for r in records
        for t in [r.token_times]
        for i in range(1, len(t))
        if a <= t[i - 1] and t[i] <= b
    ]
    out: dict[str, float | None] = {}
    for name, xs in (("ttft", ttft), ("itl", itl)):
        out[f"{name}_p50_ms"] = percentile(xs, 50) if xs else None
        out[f"{name}_p99_ms"] = percentile(xs, 99) if xs else None
    return out


def _whole_interval_reports(window: list[ServerGauges]) -> list[ServerGauges]:
    """Scrapes of reports whose whole log interval ran at one batch size.

    SGLang publishes running and gen_throughput once per --decode-log-interval; the first report
    after a level change averages tokens over steps at the old batch but names the new running
    count. Keep a scrape only when the report before it (the previous distinct pair) had the
    same running count.
    """
    kept: list[ServerGauges] = []
    prev: tuple[float | None, float | None] | None = None
    current: tuple[float | None, float | None] | None = None
    for x in window:
        pair = (x.running, x.gen_throughput)
        if pair != current:
            prev, current = current, pair
        if prev is not None and prev[0] == pair[0]:
            kept.append(x)
    return kept


def _distinct_reports(scrapes: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """One (running, gen_throughput) per report, not per scrape.

    The sampler scrapes several times per log interval, and every scrape between two logs reads
    the same published report: counted per scrape, one report made a CI of zero width from
    "three samples" (seen at c57 of a 4 s level), the kind of certainty nobody observed. A scrape
    repeating the pair before it is the same report."""
    reports: list[tuple[float, float]] = []
    for pair in scrapes:
        if not reports or reports[-1] != pair:
            reports.append(pair)
    return reports


def _stream_step_ms(
    records: list[RequestRecord], a: float, b: float, min_tokens: int = 8, min_streams: int = 2
) -> float | None:
    """Median over streams of (last − first token in the window) / (tokens − 1).

    Each stream gets one token per decode step, so this is the step time. It is robust to chunks
    that carry several tokens (a busy client or a proxy coalescing writes), which make individual
    inter-token gaps 0 and break a median of raw gaps. A level of concurrency 1 has one stream
    (its closed loop sends the next request only when the last ends): `min_streams` 1 there,
    else the batch-1 level was never measured (issue 38's real sweeps: level 1 always unusable).
    """
    per_stream = []
    for r in records:
        inside = [t for t in r.token_times if a <= t <= b]
        # a stream whose tokens all came in one chunk has no step to show (0 ms): left out, so
        # a level of such streams has no step time rather than a zero one the law divides by
        if len(inside) >= min_tokens and inside[-1] > inside[0]:
            per_stream.append((inside[-1] - inside[0]) / (len(inside) - 1) / 1e6)
    return statistics.median(per_stream) if len(per_stream) >= min_streams else None
