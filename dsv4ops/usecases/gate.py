"""The deploy's canary gate: smoke plus the suites the flag change calls for, judged by the
profile's thresholds, after the end-to-end probe passed.

The verdicts of the suites are combined by the canary's own rule (`canary.verdict.worst`: FAIL
beats INCONCLUSIVE beats PASS). A FAIL ends the gate at once (the deploy rolls back); an
INCONCLUSIVE does not, since a later suite may still FAIL (a smoke the busy client could not
judge, then a corruption suite that catches corrupted tool calls).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from dsv4ops.apikey import auth_headers
from dsv4ops.deployment import WORKERS, Deployment
from dsv4ops.journal.gates import GateVerdict
from dsv4ops.orchestrate.engine import CanaryStep, Progress

if TYPE_CHECKING:
    from dsv4ops.canary import SuiteResult, Thresholds
    from dsv4ops.routerkind import RouterKind

# (suite, router URL, worker URLs, thresholds, buckets, duration or None, model,
#  decode log interval) -> SuiteResult
SuiteRunner = Callable[
    [str, str, Sequence[str], "Thresholds", tuple[int, ...], float | None, str, int],
    "SuiteResult",
]


def thresholds_of(deployment: Deployment) -> Thresholds:
    """The thresholds the deployment's profile sets in its `canary` section, as recorded
    (`Deployment.canary`; RecordedSettingError for a value that does not fit), with the
    tool-call parser its decode was started with."""
    from dsv4ops.canary import Thresholds

    judging = Thresholds.judging(deployment.canary)
    return judging.model_copy(update={"tool_call_parser": tool_call_parser_of(deployment)})


def tool_call_parser_of(deployment: Deployment) -> str | None:
    """The decode's `--tool-call-parser` as it was started (its recorded argv; None: none)."""
    argv = deployment.component("decode").argv
    value = None
    for i, arg in enumerate(argv):
        head, eq, tail = arg.partition("=")
        if head == "--tool-call-parser":
            value = tail if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def buckets_of(deployment: Deployment) -> tuple[int, ...]:
    """The decode CUDA-graph buckets the profile resolves to (empty when unknown)."""
    return deployment.decode_buckets


def canary_gate(
    previous: Deployment | None,
    *,
    thresholds: Thresholds,
    buckets: tuple[int, ...],
    model: str,
    duration_s: float | None,
    progress: Progress,
    run: SuiteRunner | None = None,
) -> CanaryStep:
    """The CanaryStep for one deploy (engine.py): (deployment, router URL) -> (verdict, reasons).
    Each suite but smoke (which sends its `smoke_requests`) runs `duration_s` seconds, None: the
    profile's `canary.gate_duration_s` (in `thresholds`).

    The canary is part of the package: if it cannot be imported the deploy must fail loudly, not
    mark a deployment known-good without its canary (the import error surfaces as a crash).
    """
    from dsv4ops.canary import Verdict, suites_for_change
    from dsv4ops.canary.verdict import worst

    gate_s = thresholds.gate_duration_s if duration_s is None else duration_s

    def step(deployment: Deployment, _router_url: str) -> tuple[GateVerdict, list[str]]:
        base = deployment.component("router").client_url()  # the canary runs on this machine
        # the router's key, read now, on this machine (the canary's client sends it)
        run_one = run or partial(
            _run_suite,
            headers=auth_headers(deployment.router_key),
            router=deployment.router_kind,
        )
        workers = [c.client_url() for c in deployment.in_order(WORKERS)]
        # said first, so a PASS without tool-call checks never reads as one with them
        off = thresholds.tool_calls_off_reason()
        reasons: list[str] = [off] if off else []
        verdicts: list[Verdict] = []
        for suite in suites_for_change(previous, deployment):
            duration = None if suite == "smoke" else gate_s
            progress(f"    canary suite {suite}" + ("" if duration is None else f" ({gate_s:g} s)"))
            # the deployed decode's log interval sizes the metrics freeze window
            result = run_one(
                suite,
                base,
                workers,
                thresholds,
                buckets,
                duration,
                model,
                deployment.decode_log_interval,
            )
            # The suite's own verdict first, so the journal records which suites ran and how.
            reasons.append(f"{suite}: {result.verdict.value}")
            reasons += baseline_reason(suite, result)
            reasons += [f"{suite}: {r}" for r in result.reasons if not r.startswith("note")]
            verdicts.append(result.verdict)
            if worst(verdicts) is Verdict.FAIL:
                break
        return GateVerdict.of(worst(verdicts)), reasons  # the suite's verdict, as the journal's

    return step


def _run_suite(
    suite: str,
    base_url: str,
    workers: Sequence[str],
    thresholds: Thresholds,
    buckets: tuple[int, ...],
    duration_s: float | None,
    model: str,
    decode_log_interval: int,
    *,
    headers: Mapping[str, str],
    router: RouterKind,
) -> SuiteResult:
    from dsv4ops.canary import run_suite

    return run_suite(
        suite,
        base_url,
        worker_urls=workers,
        thresholds=thresholds,
        buckets=buckets,
        duration_s=duration_s,
        model=model,
        decode_log_interval=decode_log_interval,
        headers=headers,
        router=router,
    )


def baseline_reason(suite: str, result: SuiteResult) -> list[str]:
    """`smoke: baseline T tok/s at concurrency C` for a passing smoke: the throughput at its
    load that `dsv4ops watch` compares with later (it reads it back from the journal)."""
    summary = result.metrics.get("summary") or {}
    tput, conc = summary.get("output_throughput"), summary.get("max_concurrency")
    if suite != "smoke" or GateVerdict.of(result.verdict) is not GateVerdict.PASS:
        return []
    if not tput or not conc:
        return []
    return [f"{suite}: baseline {float(tput):.0f} tok/s at concurrency {int(conc)}"]
