"""`dsv4ops buckets plan`: the decode CUDA-graph buckets with the least expected time per
generated token for the traffic one source shows (a canary sweep report with its step law, a
distribution file, or a live decode's /metrics sampled by `usecases/buckets.py`), against the
shipped ladders, and the `profile set` command that makes the plan a revision."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from dsv4ops.errors import DsOpsError
from dsv4ops.waits import QUIET, WaitObserver

if TYPE_CHECKING:
    from dsv4ops.buckets.plan import Evaluation, GraphMemory, StepLaw
    from dsv4ops.buckets.sources import ReportLevels

LADDERS = ("step8", "step4:40-96", "sglang-default")  # what the planned ladder is compared with


class LawSource(enum.Enum):
    """Where the plan's step law came from (`law_source` in --json, its words beside the law in
    the text): a plan on a law nobody measured must say so."""

    GIVEN = "given"
    FITTED = "fitted"
    ASSUMED = "assumed"

    @property
    def words(self) -> str:
        return _LAW_WORDS[self]


_LAW_WORDS = {
    LawSource.GIVEN: "given by --law",
    LawSource.FITTED: "fitted by the report",
    LawSource.ASSUMED: "assumed: the seeds' law, none was measured (a sweep report or --law A,B "
    "gives one)",
}


class LawJSON(TypedDict):
    a_ms: float
    b_ms: float


class GraphMemoryJSON(TypedDict):
    mb_per_graph: float | None
    source: str
    observed_gb: float | None
    captured_graphs: int | None


class ContextJSON(TypedDict):
    measured: int | None
    profile: int | None
    note: str | None


class BucketPlanJSON(TypedDict):
    """What `buckets plan --json` prints (BucketPlan.to_json)."""

    law: LawJSON
    law_source: str  # LawSource's value: given, fitted or assumed
    graph_budget: int
    memory_budget_mb: float | None
    over_budget: list[str]  # the ladders over --memory-mb
    distribution: dict[str, float]
    graph_memory: GraphMemoryJSON
    ladders: list[dict[str, object]]  # each ladder's Evaluation.to_json
    command: str
    source: str | None
    kept_below: list[int]
    decode_context_length: ContextJSON


@dataclass(frozen=True)
class BucketPlan:
    """The plan and its inputs: the step law, the distribution, the graph budget, the buckets
    kept below a sweep's lowest level, each ladder's expected cost (the planned one first)."""

    step_law: StepLaw
    dist: dict[int, float]
    graph_budget: int
    source: ReportLevels | None
    kept: list[int]
    profile: str
    memory: GraphMemory
    observed_gb: float | None
    captured: int | None
    evals: list[Evaluation]
    best: list[int]
    # The decode context length the report's sweep ran at, and the profile's (the revision's):
    # the DSV4 decode graph width follows it (sglang#40442), so a law holds at its own only.
    measured_context: int | None = None
    profile_context: int | None = None
    law_source: LawSource = LawSource.ASSUMED
    memory_budget_mb: float | None = None  # --memory-mb

    @property
    def over_budget(self) -> list[str]:
        """The ladders whose graphs' memory is over --memory-mb (the planned one included)."""
        budget = self.memory_budget_mb
        return [
            e.name
            for e in self.evals
            if budget is not None and e.graph_memory_mb is not None and e.graph_memory_mb > budget
        ]

    @property
    def budget_note(self) -> str | None:
        """Said when --memory-mb was given: unused (no graph size), below one graph, or exceeded
        by the ladders the plan is compared with."""
        budget, per_graph = self.memory_budget_mb, self.memory.mb_per_graph
        if budget is None:
            return None
        if per_graph is None:
            return f"--memory-mb {budget:g} not used: the memory of one graph is unknown"
        if budget < per_graph:
            return (
                f"--memory-mb {budget:g} holds no graph of {per_graph:g} MB; the plan keeps "
                f"only {self.best[-1]}, the largest batch, which is always a bucket"
            )
        over = self.over_budget
        return f"over the {budget:g} MB budget: {', '.join(over)}" if over else None

    @property
    def context_note(self) -> str | None:
        """Said when the law was measured at another decode context length than the profile's."""
        if self.measured_context is None or self.measured_context == self.profile_context:
            return None
        return (
            f"the sweep ran the decode at context length {self.measured_context}, {self.profile} "
            f"sets {self.profile_context or 'none (the model default)'}: the DSV4 decode graph "
            "width follows it (sglang#40442), so this law may not hold there; the A/B decides"
        )

    @property
    def command(self) -> str:
        return (
            f"dsv4ops profile set {self.profile} buckets={','.join(map(str, self.best))} "
            f"--as {self.profile}-planned"
        )

    def to_json(self) -> BucketPlanJSON:
        return {
            "law": {"a_ms": self.step_law.a_ms, "b_ms": self.step_law.b_ms},
            "law_source": self.law_source.value,
            "graph_budget": self.graph_budget,
            "memory_budget_mb": self.memory_budget_mb,
            "over_budget": self.over_budget,
            "distribution": {str(n): round(p, 5) for n, p in self.dist.items()},
            "graph_memory": {
                "mb_per_graph": self.memory.mb_per_graph,
                "source": self.memory.source,
                "observed_gb": self.observed_gb,
                "captured_graphs": self.captured,
            },
            "ladders": [e.to_json() for e in self.evals],
            "command": self.command,
            "source": self.source.source if self.source else None,
            "kept_below": self.kept,
            "decode_context_length": {
                "measured": self.measured_context,
                "profile": self.profile_context,
                "note": self.context_note,
            },
        }


def plan_buckets(
    *,
    report: Path | None,
    distribution: Path | None,
    metrics_url: str | None,
    window_s: float,
    law: str | None,
    max_buckets: int,
    max_bs: int,
    graph_mb: float | None,
    memory_mb: float | None,
    profile: str,
    waits: WaitObserver = QUIET,
) -> BucketPlan:
    """Plan from exactly one of `report`, `distribution`, `metrics_url` (its sampling shown to
    `waits`). Raises DsOpsError."""
    from dsv4ops.buckets import plan as P
    from dsv4ops.profiles.buckets import resolve_buckets

    if sum(x is not None for x in (report, distribution, metrics_url)) != 1:
        raise DsOpsError(
            "give exactly one of --from REPORT, --distribution FILE, --metrics-url URL"
        )
    counts, step_law, observed_gb, captured, source = _read_counts(
        report, distribution, metrics_url, window_s, law, waits
    )
    law_source = (
        LawSource.GIVEN if law else LawSource.FITTED if step_law is not None else LawSource.ASSUMED
    )
    step_law = step_law or P.StepLaw()
    try:
        dist = P.normalise(counts)
    except ValueError as exc:
        raise DsOpsError(str(exc)) from None
    memory = P.graph_memory_estimate(graph_mb, observed_gb, captured)
    k = P.graph_budget(max_buckets, memory.mb_per_graph, memory_mb)
    kept = _kept_below(source, dist, profile, max_bs)
    if len(kept) >= k:
        raise DsOpsError(
            f"--max-buckets {k}: the {len(kept)} buckets {profile} has below the "
            f"sweep's lowest level leave no graph to plan",
            hint="raise --max-buckets",
        )
    best = sorted({*kept, *P.plan(dist, max_buckets=k - len(kept), max_bs=max_bs)})
    ladders = {"planned": best} | {
        name: resolve_buckets(name, tp_size=4, max_running_requests=max_bs) for name in LADDERS
    }
    evals = [
        P.evaluate(name, dist, b, step_law, memory.mb_per_graph) for name, b in ladders.items()
    ]
    measured = source.decode_context_length if source is not None else None
    return BucketPlan(
        step_law,
        dist,
        k,
        source,
        kept,
        profile,
        memory,
        observed_gb,
        captured,
        evals,
        best,
        measured,
        _profile_context(profile) if measured is not None else None,
        law_source,
        memory_mb,
    )


def _profile_context(profile: str) -> int | None:
    """The profile's decode --context-length (None: the model default). Read only when a report
    recorded the sweep's, to compare the two: the other sources need no profile."""
    from dsv4ops.profiles import load_profile
    from dsv4ops.profiles.flags import context_length

    return context_length(load_profile(profile).decode.extra_args)


def _read_counts(
    report: Path | None,
    distribution: Path | None,
    metrics_url: str | None,
    window: float,
    law: str | None,
    waits: WaitObserver,
) -> tuple[dict[int, float], StepLaw | None, float | None, int | None, ReportLevels | None]:
    """The observed batch sizes from the one source given: a canary report (with its step law),
    a distribution file, or a live decode's /metrics (with its graph memory)."""
    from dsv4ops.buckets import sources as S

    step_law = S.parse_law(law) if law else None
    observed_gb: float | None = None
    captured: int | None = None
    source: S.ReportLevels | None = None
    if report is not None:
        source = S.from_report(report)
        counts, step_law = source.counts, step_law or source.law
    elif distribution is not None:
        counts = S.from_file(distribution)
    else:
        from dsv4ops.usecases.buckets import sample_decode

        live = sample_decode(str(metrics_url), window_s=window, waits=waits)
        counts, observed_gb, captured = live.counts, live.graph_memory_gb, live.captured_graphs
    return counts, step_law, observed_gb, captured, source


def _kept_below(source: object, dist: dict[int, float], profile: str, max_bs: int) -> list[int]:
    """A sweep's levels are a staircase, not traffic: nothing was observed below its lowest level,
    so planning there would drop every small bucket (a live decode at 4 running would then run
    the graph of the lowest level). The profile's own buckets below it are kept as they are."""
    if source is None or not getattr(source, "staircase", False):
        return []
    from dsv4ops.profiles import load_profile

    floor = min(dist)
    return [b for b in load_profile(profile).decode_buckets if b < floor and b < max_bs]
