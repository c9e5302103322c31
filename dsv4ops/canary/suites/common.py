"""What every suite shares: its context, the live harness (client, watchdog, self-check, metrics
sampler, progress) and the judges that turn observations into verdict reasons."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dsv4ops.canary import records as R
from dsv4ops.canary.loadgen import ChatClient
from dsv4ops.canary.progress import DEFAULT_DECODE_LOG_INTERVAL
from dsv4ops.canary.reach import read_limits, require_reachable
from dsv4ops.canary.records import RequestRecord
from dsv4ops.canary.sampler import MetricsSampler
from dsv4ops.canary.selfcheck import SelfCheck, SelfCheckReport
from dsv4ops.canary.toolcalls import ToolProblem, check_calls
from dsv4ops.canary.verdict import Findings, Kind, Thresholds
from dsv4ops.canary.watchdog import Watchdog
from dsv4ops.canary.workload import TOOL_SCHEMAS, NonceBook, ToolExpectation
from dsv4ops.clock import perf_ns
from dsv4ops.jsontypes import JSONObject
from dsv4ops.routerkind import RouterKind

Progress = Callable[[str], None]
ARGS_MISMATCH = "args_mismatch"


@dataclass
class SuiteContext:
    base_url: str
    worker_urls: tuple[str, ...] = ()
    thresholds: Thresholds = field(default_factory=Thresholds)
    buckets: tuple[int, ...] = ()
    concurrency: int | None = None
    duration_s: float | None = None
    progress: Progress | None = None
    model: str = "default"
    # what every request to the router carries besides the canary's own (its API key)
    headers: Mapping[str, str] = field(default_factory=dict)
    rate_per_s: float | None = (
        None  # open-loop Poisson arrivals (smoke/soak) instead of closed loop
    )
    # the decode's --decode-log-interval: how long its progress counter may rest while healthy
    decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL
    # which router base_url is (None: not known, e.g. `canary --url`): what it passes on
    router: RouterKind | None = None

    def say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)


@dataclass
class Harness:
    client: ChatClient
    watchdog: Watchdog
    sampler: MetricsSampler
    selfcheck: SelfCheck
    records: list[RequestRecord]
    t0_ns: int


@contextlib.asynccontextmanager
async def harness(ctx: SuiteContext, *, connections: int, name: str) -> AsyncIterator[Harness]:
    """Client + hang watchdog + self-check + metrics sampler + a 1-second progress line."""
    th = ctx.thresholds
    wd = Watchdog(
        first_token_deadline_s=th.first_token_deadline_s,
        stall_s=th.stall_s,
        freeze_s=th.freeze_s,
        tick_s=th.watchdog_tick_s,
        decode_log_interval=ctx.decode_log_interval,
    )
    records: list[RequestRecord] = []
    async with ChatClient(
        ctx.base_url,
        connections=connections + 8,
        total_timeout_s=th.hang_deadline_s,
        watchdog=wd,
        headers=ctx.headers,
    ) as client:
        await require_reachable(client)
        client.limits = await read_limits(client, ctx.worker_urls)
        sampler = MetricsSampler(client, ctx.worker_urls, watchdog=wd)
        sc = SelfCheck(cpu_max=th.client_cpu_max, lag_p99_max_ms=th.loop_lag_p99_max_ms)
        h = Harness(client, wd, sampler, sc, records, perf_ns())
        ticker = asyncio.create_task(_progress(ctx, h, name)) if ctx.progress else None
        try:
            async with wd, sampler, sc:
                yield h
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker


async def _progress(ctx: SuiteContext, h: Harness, name: str) -> None:
    last_events = 0
    while True:
        await asyncio.sleep(1.0)
        # every SSE event received so far, open streams included (a long stream's tokens would
        # otherwise show up only when it ends); a parsed stream keeps its count in `events`
        events = sum(r.events if r.t_end else len(r.times) for r in h.records)
        ended = Counter(
            "completed" if r.ok else "cancelled" if r.cancelled else "failed"
            for r in h.records
            if r.t_end
        )
        ctx.say(
            f"{name}: {ended['completed']} completed, {ended['cancelled']} cancelled, "
            f"{ended['failed']} failed, {len(h.watchdog.active)} in flight, "
            f"{events - last_events} events in the last 1 s, "
            f"{len(h.watchdog.events)} hang events"
        )
        last_events = events


def tool_problems(
    rec: RequestRecord, expect: ToolExpectation, nonces: NonceBook
) -> list[ToolProblem]:
    """Validate a tool-call response: structure, JSON, schema, nonce, and the exact arguments."""
    problems = check_calls(
        rec.tool_calls,
        TOOL_SCHEMAS,
        expected_nonce=expect.nonce,
        known_nonces=nonces.owners,
        content=rec.content,
        finish_reason=rec.finish_reason,
    )
    if not problems and rec.tool_calls:
        call = rec.tool_calls[0]
        got = json.loads(call.arguments) if call.arguments.strip() else {}
        if call.name != expect.tool or got != expect.args:
            problems.append(
                ToolProblem(
                    ARGS_MISMATCH,
                    f"{call.name} {call.arguments[:120]!r}, "
                    f"expected {expect.tool} {expect.args}",
                )
            )
    return problems


def counted_errors(
    records: Iterable[RequestRecord], ignore: Sequence[str] = (R.ERR_CANCELLED,)
) -> Counter[str]:
    return Counter(r.error for r in records if r.error and r.error not in ignore)


def judge_errors(
    f: Findings,
    records: Sequence[RequestRecord],
    th: Thresholds,
    *,
    ignore: Sequence[str] = (R.ERR_CANCELLED,),
    require_completed: bool = True,
    hangs_judged: bool = False,
) -> None:
    """FAIL when more than `max_error_rate` of the requests failed (our own cancellations aside).

    With `hangs_judged`, the streams the watchdog cut are left to `judge_hangs` (see
    `judge_streams`). Also notes streams that completed on a finish_reason without
    `data: [DONE]`: complete, but a server that omits the marker is worth knowing about (a proxy
    may be dropping it)."""
    no_done = [r for r in records if r.ended_without_done]
    if no_done:
        f.note(
            f"{len(no_done)} of {len(records)} streams ended after their finish_reason without "
            "data: [DONE] (counted complete)"
        )
    refused = [r for r in records if refused_by_server(r)]
    judge_refusals(f, refused, len(records), th.max_error_rate)
    judged = [
        r
        for r in records
        if r.error not in ignore
        and not refused_by_server(r)
        and not (hangs_judged and r.cut_by_watchdog)
    ]
    if not judged:
        if require_completed:
            f.unsure("no request completed", Kind.BLIND)
        return
    errors = counted_errors(judged, ignore)
    n_err = sum(errors.values())
    if n_err / len(judged) > th.max_error_rate:
        first = next(r for r in judged if r.error and r.error not in ignore)
        kinds = ", ".join(f"{k}={v}" for k, v in errors.most_common())
        f.fail(
            f"{n_err} of {len(judged)} requests failed ({kinds}); first: {first_error(first)}",
            Kind.ERRORS,
        )


def refused_by_server(rec: RequestRecord) -> bool:
    """The server answered the request with a 4xx: it said no to what was asked, so the request
    is evidence of neither health nor failure (a 5xx is the server failing: counted as an
    error)."""
    return rec.error == R.ERR_HTTP and 400 <= rec.status < 500


def judge_refusals(
    f: Findings, refused: Sequence[RequestRecord], total: int, max_rate: float
) -> None:
    """Every refusal is said, by status and with the server's own words; more than
    `max_rate` of the requests refused leaves the suite blind (INCONCLUSIVE): a verdict is
    never built on requests the server did not serve."""
    if not refused:
        return
    by_status = Counter(r.status for r in refused)
    line = (
        f"the server refused {len(refused)} of {total} requests ("
        + ", ".join(f"HTTP {k} x{v}" for k, v in sorted(by_status.items()))
        + f"); first: {first_error(refused[0])}"
    )
    if len(refused) / max(total, 1) > max_rate:
        f.unsure(line + " — too many to judge by", Kind.REFUSED)
    else:
        f.note(line, Kind.REFUSED)


def first_error(rec: RequestRecord) -> str:
    """One failed request, never an empty string: which request, what failed, what it answered
    (an HTTP error with an empty body has no detail, its status and kind still say something)."""
    parts = [f"{rec.rid}: {rec.error}"]
    if rec.status and rec.status != 200:
        parts.append(f"HTTP {rec.status}")
    detail = " ".join(rec.error_detail.split())[:120]
    return " ".join(parts) + (f": {detail}" if detail else " (the server sent no detail)")


def judge_workers(f: Findings, h: Harness) -> None:
    """A worker that refused connections to the end of the suite is down: a FAIL on positive
    evidence (its port closed), whatever the streams showed (a request held by a prefill whose
    decode died waits for the transfer timeout, minutes, without an error or a token)."""
    for dead in h.sampler.dead_workers():
        since_s = max(0.0, (dead.since_ns - h.t0_ns) / 1e9)
        f.fail(
            f"worker {dead.url} is down: its last {dead.refused} /metrics scrapes were refused "
            f"(nothing listens on its port since {since_s:.1f} s into the suite)",
            Kind.WORKER_DOWN,
        )


def judge_streams(
    f: Findings, h: Harness, th: Thresholds, *, require_completed: bool = True
) -> None:
    """The failed requests and the hangs, each stream judged once. A stream the watchdog cut is
    the hang judge's evidence: counted again as a failed request, it would turn a hang the client
    cannot vouch for (its own loop stalled a second or more: INCONCLUSIVE) into a FAIL built on
    the client's lag."""
    judge_errors(f, h.records, th, require_completed=require_completed, hangs_judged=True)
    judge_hangs(f, h.watchdog, h.selfcheck.report)


def judge_hangs(f: Findings, wd: Watchdog, sc: SelfCheckReport) -> None:
    if not wd.events:
        return
    kinds = Counter(e.kind for e in wd.events)
    first = wd.events[0]
    line = (
        f"hang: {', '.join(f'{v} {k}' for k, v in kinds.items())}; first: {first.detail} "
        f"(detected {first.detection_latency_s:.2f} s after the silence began)"
    )
    # A client whose loop stalled for seconds cannot tell a server stall from its own.
    if sc.loop_lag_max_ms >= 1000.0:
        f.unsure(line + f" — but the client loop stalled {sc.loop_lag_max_ms:.0f} ms", Kind.HANG)
    else:
        f.fail(line, Kind.HANG)


def judge_tools(
    f: Findings, problems: dict[str, list[ToolProblem]], n_calls: int, th: Thresholds
) -> None:
    bad = {rid: p for rid, p in problems.items() if p}
    if n_calls == 0:
        return
    rate = len(bad) / n_calls
    if rate > th.corruption_max_rate:
        kinds = Counter(p.kind for ps in bad.values() for p in ps)
        first_rid, first = next(iter(bad.items()))
        # A call can have several findings (a wrong nonce and a missing argument): the calls and
        # the findings are counted apart, so the kinds add up to the findings, not the calls.
        findings = sum(kinds.values())
        f.fail(
            f"tool-call corruption in {len(bad)} of {n_calls} calls: {findings} "
            f"finding{'s' if findings != 1 else ''} ("
            + ", ".join(f"{k}={v}" for k, v in kinds.most_common())
            + f"); first ({first_rid}): {first[0]}",
            Kind.TOOL_CORRUPTION,
        )


def judge_client(f: Findings, sc: SelfCheckReport) -> None:
    for problem in sc.problems:
        f.unsure(problem.text, problem.kind)


def judge_latency(f: Findings, summary: JSONObject, th: Thresholds, client_bound: bool) -> None:
    checks = (("p99_ttft_ms", th.ttft_p99_max_ms), ("p99_itl_ms", th.itl_p99_max_ms))
    for key, limit in checks:
        value = summary.get(key)
        if limit is None or value is None or value != value:
            continue
        if value > limit:
            line = f"{key} {value:.1f} > {limit:.1f}"
            (f.unsure if client_bound else f.fail)(
                line + (" (client-bound)" if client_bound else ""), Kind.LATENCY
            )


async def cancel_all(tasks: Iterable[asyncio.Task[object]]) -> None:
    tasks = list(tasks)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
