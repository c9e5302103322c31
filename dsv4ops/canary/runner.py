"""`run_suite`: the one entry point deploy and the CLI call; `suites_for_change`: which suites a
profile change calls for."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from dsv4ops.canary import eventloop
from dsv4ops.canary.progress import DEFAULT_DECODE_LOG_INTERVAL
from dsv4ops.canary.suites.abort_cascade import run_abort_cascade
from dsv4ops.canary.suites.common import Progress, SuiteContext
from dsv4ops.canary.suites.corruption import run_corruption
from dsv4ops.canary.suites.smoke import run_smoke, run_soak
from dsv4ops.canary.suites.sweep import run_sweep
from dsv4ops.canary.verdict import (
    SuiteResult,
    Thresholds,
    Verdict,
    worst,
)
from dsv4ops.deployment import Deployment
from dsv4ops.errors import CanaryError
from dsv4ops.profiles.profile_spec import SWITCHES
from dsv4ops.routerkind import RouterKind

SUITES: dict[str, Callable[[SuiteContext], Awaitable[SuiteResult]]] = {
    "smoke": run_smoke,
    "corruption": run_corruption,
    "abort-cascade": run_abort_cascade,
    "sweep": run_sweep,
    "soak": run_soak,
}
# `all` runs the abort cascade last: a wedge it provokes must not spoil the other suites.
ALL_ORDER = ("smoke", "corruption", "sweep", "soak", "abort-cascade")
SUITE_NAMES = (*SUITES, "all")


def run_suite(
    name: str,
    base_url: str,
    *,
    worker_urls: Sequence[str] = (),
    thresholds: Thresholds | None = None,
    buckets: Sequence[int] = (),
    concurrency: int | None = None,
    duration_s: float | None = None,
    report_dir: str | Path | None = None,
    progress: Progress | None = None,
    model: str = "default",
    rate_per_s: float | None = None,
    decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL,
    headers: Mapping[str, str] | None = None,
    router: RouterKind | None = None,
) -> SuiteResult:
    """Run one suite (or `all`) against an OpenAI-compatible endpoint; blocking.

    `worker_urls`: the prefill/decode servers (metrics and /abort_request; the
    router exposes neither). `thresholds`: what the suites judge by (None: the canary defaults;
    a caller with a profile or a deployment passes `thresholds_from_profile(...)` of its canary
    section); `buckets`: the decode CUDA-graph buckets (empty when unknown). `rate_per_s`:
    smoke/soak send open-loop Poisson arrivals (capped at the concurrency) instead of a closed loop.
    `decode_log_interval`: the deployed decode's `--decode-log-interval` (SGLang's 40 when not
    given), which sizes the metrics freeze window (`progress.py`); a caller with a Deployment
    passes `deployment.decode_log_interval`. `headers`: what every request to the router carries
    (its API key: `apikey.auth_headers(deployment.router_key)`). `router`: which router
    `base_url` is (`deployment.router_kind`; None when not known, e.g. `canary --url`): what
    the abort cascade can abort through it (`RouterKind.request_ids`).
    Raises CanaryError when the suite cannot run at all (unknown suite, unreachable endpoint).
    """
    if name not in SUITE_NAMES:
        raise CanaryError(f"unknown suite {name!r}; choose from {', '.join(SUITE_NAMES)}")
    if report_dir is not None:
        from dsv4ops.canary.report import prepare_report_dir

        prepare_report_dir(Path(report_dir))
    ctx = SuiteContext(
        base_url=base_url,
        worker_urls=tuple(dict.fromkeys(worker_urls)),
        thresholds=thresholds or Thresholds(),
        buckets=tuple(int(b) for b in buckets),
        concurrency=concurrency,
        duration_s=duration_s,
        progress=progress,
        model=model,
        rate_per_s=rate_per_s,
        decode_log_interval=decode_log_interval,
        headers=dict(headers or {}),
        router=router,
    )
    # A full garbage collection stalls the event loop for as long as it scans the heap (hundreds
    # of ms in a long-lived process), which the self-check rightly reads as untrustworthy receipt
    # timestamps. Freeze what exists, so collections during the suite only scan the suite's own
    # young objects. No collection first: it would scan that whole heap on every suite (0.1-0.3 s
    # of CPU in a process that runs many: ab, watch, the test workers), and the garbage frozen
    # with the rest is collected as usual once unfrozen.
    gc.freeze()
    try:
        result = eventloop.run(_run(name, ctx))
    finally:
        gc.unfreeze()
    if report_dir is not None:
        from dsv4ops.canary.report import write_report

        write_report(result, Path(report_dir), thresholds=ctx.thresholds)
    return result


async def _run(name: str, ctx: SuiteContext) -> SuiteResult:
    if name != "all":
        return await SUITES[name](ctx)
    results = []
    for suite in ALL_ORDER:
        ctx.say(f"== {suite}")
        results.append(await SUITES[suite](ctx))
    return combined(results)


def combined(results: list[SuiteResult]) -> SuiteResult:
    """`all`: the worst verdict; one line per suite's verdict, then every suite's FAIL and
    INCONCLUSIVE reasons (each named by its suite, in `findings` with its kind too)."""
    verdict = worst([r.verdict for r in results])
    reasons = [f"{r.suite}: {r.verdict.value}" for r in results]
    found = [replace(x, suite=r.suite) for r in results for x in r.findings if x.level != "note"]
    reasons += [f"{x.suite}: {x.line}" for x in found]
    return SuiteResult(
        suite="all",
        verdict=verdict,
        reasons=reasons,
        metrics={},
        sub_results=results,
        findings=found,
    )


def suites_for_change(old: Deployment | None, new: Deployment) -> list[str]:
    """Suites a deploy runs for a profile change: smoke always, plus the suite each on/off flag
    that changed declares (its `Switch.suite` in profiles/profile_spec.py; docs/profiles.md's
    toggles table, generated from them, lists each), corruption when the kernel package changed, and sweep when the decode buckets or
    the decode's context length did (the sawtooth; the DSV4 decode graph width follows
    --context-length, sglang#40442); in the order `all` runs them.

    `old` and `new` are deployments, compared by their recorded flags (`Deployment.flags` and
    `Deployment.switches`, typed: RecordedSettingError for a value that does not fit) and
    kernel packages; `old` None means a first deploy.
    """
    if old is None:
        return ["smoke"]
    a, b = old.flags, new.flags
    wanted = {"smoke"}
    if old.kernel_package != new.kernel_package:
        wanted.add("corruption")
    if a.decode_buckets != b.decode_buckets or a.decode_context_length != b.decode_context_length:
        wanted.add("sweep")
    for flag, switch in SWITCHES:  # each on/off flag names the suite a change of it runs
        if switch.suite is not None and old.switches.get(flag) != new.switches.get(flag):
            wanted.add(switch.suite)
    return [s for s in ALL_ORDER if s in wanted]


__all__ = ["SUITE_NAMES", "SuiteResult", "Verdict", "run_suite", "suites_for_change"]
