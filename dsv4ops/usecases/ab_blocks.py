"""One block of an A/B: warm the deployed arm up, run the seeded canary workload on it and turn
the suite's report into the block's values; and the correctness gates run on B.

Values per concurrency level (ab.model.METRICS): output tok/s, TTFT p50/p99 and ITL p50/p99 of
that level; the step law's a and b, fitted over the whole staircase (against the padded batch
when the buckets are known), under FIT_LEVEL, and only from three levels up (a line through two
points is no evidence of a law). Output tok/s and the law come from the server's own accounting
(gen_throughput over whole log intervals, as the sweep's verdict uses it: the client's receipt
times are distorted by its own load) where every block of the experiment has it at that level,
else from the client's token times for every block: a comparison never mixes the two, which on
the twin are even different clocks (model time vs wall time). Latencies are the client's. The
canary's workloads are deterministic: every block sends the same prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv4ops.apikey import auth_headers
from dsv4ops.deployment import WORKERS, Deployment
from dsv4ops.journal.gates import GateResult as GateRecord
from dsv4ops.journal.gates import GateSource, GateVerdict
from dsv4ops.orchestrate.engine import Progress
from dsv4ops.orchestrate.operation import RunningOperation

if TYPE_CHECKING:
    from dsv4ops.ab.decision import GateResult
    from dsv4ops.canary import SuiteResult, Thresholds
    from dsv4ops.clock import Clock
    from dsv4ops.usecases.ab_plan import ABPlan

MIN_FIT_LEVELS = 3
# (suite, deployment, thresholds, duration or None, concurrency or None) -> SuiteResult
SuiteRun = Callable[[str, Deployment, "Thresholds", "float | None", "int | None"], "SuiteResult"]


@dataclass(frozen=True)
class Measured:
    client: dict[int, dict[str, float]]  # every metric, from the client's receipt times
    server: dict[int, dict[str, float]]  # output tok/s and the law from the server's accounting
    result: SuiteResult  # the measured suite's own report (its verdict gates a bucket change)
    duration_s: float


def choose_sources(measured: Sequence[Measured]) -> list[dict[int, dict[str, float]]]:
    """Each block's values: the server's numbers at a level (and for the law) where every block
    has them there, the client's elsewhere (see the module docstring)."""
    levels = {c for m in measured for c in m.client} | {c for m in measured for c in m.server}
    out: list[dict[int, dict[str, float]]] = [{} for _ in measured]
    for c in levels:
        server = all(m.server.get(c) for m in measured)
        for values, m in zip(out, measured, strict=True):
            merged = {**m.client.get(c, {}), **(m.server.get(c, {}) if server else {})}
            if merged:
                values[c] = merged
    return out


def canary_runner(progress: Progress) -> SuiteRun:
    """Run a canary suite against the deployment's router (from this machine), its workers'
    metrics read alongside: the same entry point `dsv4ops canary` uses."""
    from dsv4ops.canary import run_suite

    def run(
        suite: str,
        dep: Deployment,
        th: Thresholds,
        duration_s: float | None,
        concurrency: int | None,
    ) -> SuiteResult:
        return run_suite(
            suite,
            dep.component("router").client_url(),
            worker_urls=[c.client_url() for c in dep.in_order(WORKERS)],
            thresholds=th,
            buckets=dep.decode_buckets,
            duration_s=duration_s,
            concurrency=concurrency,
            model=dep.model_name,
            progress=lambda line: progress(f"    {line}"),
            headers=auth_headers(dep.router_key),  # the block's router key, when it needs one
            router=dep.router_kind,
        )

    return run


def measure(
    run: SuiteRun,
    dep: Deployment,
    *,
    suite: str,
    thresholds: Thresholds,
    levels: Sequence[int],
    measured_s: float,
    warmup_s: float,
    monotonic: Callable[[], float],
) -> Measured:
    """Warm up (a soak at the top level whose numbers are discarded), then the measured suite."""
    if warmup_s > 0:
        run("soak", dep, thresholds, warmup_s, max(levels))
    t0 = monotonic()
    concurrency = None if suite == "sweep" else levels[0]
    result = run(suite, dep, thresholds, measured_s, concurrency)
    client, server = block_values(result)
    return Measured(client, server, result, monotonic() - t0)


def block_values(
    result: SuiteResult,
) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, float]]]:
    """(client's values, server's values) of a sweep or soak report (see the module docstring)."""
    from dsv4ops.ab.model import FIT_LEVEL

    m = result.metrics
    if result.suite == "soak":
        s = m.get("summary") or {}
        level = int(s.get("max_concurrency") or 0)
        keys = {
            "output_tok_s": "output_throughput",
            "ttft_p50_ms": "median_ttft_ms",
            "ttft_p99_ms": "p99_ttft_ms",
            "itl_p50_ms": "median_itl_ms",
            "itl_p99_ms": "p99_itl_ms",
        }
        soak = (
            {level: _finite({k: s.get(src) for k, src in keys.items()})}
            if s.get("completed")
            else {}
        )
        return soak, {}
    client: dict[int, dict[str, float]] = {}
    server: dict[int, dict[str, float]] = {}
    for p in m.get("levels") or []:
        c = int(p["concurrency"])
        client[c] = _finite(
            {
                k: p.get(k)
                for k in ("output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")
            }
        )
        server[c] = _finite({"output_tok_s": p.get("output_tok_s_metrics")})
    fits = m.get("fit") or {}
    for out, law in (
        (client, fits.get("padded_bs") or fits.get("bs")),
        (server, fits.get("metrics")),
    ):
        if law and int(law.get("n") or 0) >= MIN_FIT_LEVELS:
            out[FIT_LEVEL] = _finite({"step_a_ms": law.get("a_ms"), "step_b_ms": law.get("b_ms")})
    return {c: v for c, v in client.items() if v}, {c: v for c, v in server.items() if v}


def run_gate(run: SuiteRun, suite: str, dep: Deployment, *, duration_s: float) -> GateResult:
    """Run one correctness suite on B, judged by B's own canary thresholds."""
    from dsv4ops.usecases.gate import thresholds_of

    duration = None if suite == "abort-cascade" else duration_s
    return gate_result(suite, [run(suite, dep, thresholds_of(dep), duration, None)])


def measured_gate(
    suite: str, gates: Sequence[str], b_results: Sequence[SuiteResult]
) -> GateResult | None:
    """The measured suite as a gate on B: a measured sweep when B's change calls for the sweep
    gate, and any suite once one of B's measured blocks FAILed. A FAIL on B is a failed gate
    whatever the workload (issue 39: a B block's sweep FAIL, journaled only as a block step, let
    a later rollback offer B's commands as known-good)."""
    from dsv4ops.canary import Verdict

    if not b_results:
        return None
    if (suite == "sweep" and "sweep" in gates) or any(r.verdict is Verdict.FAIL for r in b_results):
        return gate_result(suite, b_results)
    return None


def journal_measured(op: RunningOperation, plan: ABPlan, m: Measured, b_op: str) -> None:
    """B's measured block `m` (deploy `b_op`), journaled as a gate of the experiment when it is
    one (a measured sweep B's change calls for, or any FAIL), the moment it is measured, with
    its GateResult (journal/gates.py: `rollback` then never offers B's commands again after a
    FAIL unless named with --to, even if the experiment dies right after)."""
    from dsv4ops.canary import Verdict
    from dsv4ops.usecases.ab_plan import GATE_NAMES

    r = m.result
    if not ((plan.suite == "sweep" and "sweep" in plan.gates) or r.verdict is Verdict.FAIL):
        return
    verdict = GateVerdict.of(r.verdict)  # the suite's verdict, as the journal's
    name = f"gate {GATE_NAMES.get(plan.suite, plan.suite)} on B (measured)"
    b_hash = plan.deployment("B").commands_hash
    rec = GateRecord(
        GATE_NAMES.get(plan.suite, plan.suite), verdict, GateSource.AB_BLOCK, b_op, b_hash,
        (_why(r),), duration_s=m.duration_s,
    )  # fmt: skip
    op.step(name, "start")
    op.step(name, "failed" if r.verdict is Verdict.FAIL else "done", detail=_why(r), gate=rec)


def gate_on_b(
    op: RunningOperation, run: SuiteRun, suite: str, plan: ABPlan, b_op: str, clock: Clock
) -> GateResult:
    """One correctness gate on B (deploy `b_op`), journaled as a step of the experiment with its
    GateResult (journal/gates.py)."""
    op.step(f"gate {suite} on B", "start")
    t0 = clock.monotonic()
    g = run_gate(run, suite, plan.deployment("B"), duration_s=plan.thresholds.stress_duration_s)
    rec = GateRecord(
        g.suite, g.judged, GateSource.AB_GATE, b_op, plan.deployment("B").commands_hash,
        (g.reason,), duration_s=clock.monotonic() - t0,
    )  # fmt: skip
    op.step(f"gate {suite} on B", "done" if g.passed else "failed", detail=g.reason, gate=rec)
    return g


def gate_result(suite: str, results: Sequence[SuiteResult]) -> GateResult:
    """B passes a gate on positive evidence: no run FAILed and at least one PASSed (a suite
    that could not judge, INCONCLUSIVE, is no evidence of safety)."""
    from dsv4ops.ab.decision import GateResult
    from dsv4ops.canary import Verdict
    from dsv4ops.usecases.ab_plan import GATE_NAMES

    name = GATE_NAMES.get(suite, suite)
    failed = [r for r in results if r.verdict is Verdict.FAIL]
    if failed:
        return GateResult(name, "B", False, _why(failed[0]), GateVerdict.FAIL)
    if not any(r.verdict is Verdict.PASS for r in results):
        why = _why(results[0]) if results else "it did not run"
        return GateResult(
            name,
            "B",
            False,
            f"the {suite} suite could not judge B: {why}",
            GateVerdict.INCONCLUSIVE,
        )
    return GateResult(name, "B", True, f"{suite}: PASS ({len(results)} run(s))", GateVerdict.PASS)


def _why(result: SuiteResult) -> str:
    lines = [r for r in result.reasons if not r.startswith("note")] or [result.verdict.value]
    return "; ".join(lines[:2])[:400]


def _finite(d: Mapping[str, object]) -> dict[str, float]:
    out = {}
    for k, v in d.items():
        if (
            isinstance(v, int | float)
            and not isinstance(v, bool)
            and v == v
            and abs(v) != float("inf")
        ):
            out[k] = float(v)
    return out
