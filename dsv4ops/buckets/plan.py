"""Choose the decode CUDA-graph buckets that minimise expected time per generated token (exact).

A decode step at `n` running requests runs the graph of the smallest bucket >= n and takes
`a + b·bucket` ms (the seeds' law, `18 + 1.05·bs`), producing n tokens; above the largest
bucket the batch runs eager at its own size. With `p(n)` the share of steps at n running, the
expected time per token is `Σ p(n)·(a + b·pad(n)) / Σ p(n)·n`: the denominator and the `a`
term do not depend on the buckets, so the best list minimises the expected padded batch
`Σ p(n)·pad(n)`, under a budget on the number of graphs (capture time) and their memory.

Exact by dynamic programming: an optimal list only uses observed sizes and max_bs (a bucket
between two observed sizes can move down to the lower one at no cost), and for candidates
c_1 < … < c_m = max_bs, best[j][t] (sizes ≤ c_j covered by t buckets, the last at c_j) is
min over i of best[i][t-1] + c_j·P(c_i < n ≤ c_j). O(m²·K).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepLaw:
    a_ms: float = 18.0
    b_ms: float = 1.05

    def step_ms(self, padded: float) -> float:
        return self.a_ms + self.b_ms * padded


def normalise(counts: Mapping[int, float]) -> dict[int, float]:
    """Observed running batch sizes (counts or weights) as probabilities; sizes < 1 dropped."""
    clean = {int(n): float(w) for n, w in counts.items() if int(n) >= 1 and w > 0}
    total = sum(clean.values())
    if not clean or not math.isfinite(total):
        raise ValueError("no running batch sizes observed (every sample was 0 or idle)")
    return {n: w / total for n, w in sorted(clean.items())}


def padded(n: int, buckets: Sequence[int]) -> int:
    """The batch the GPU runs: the smallest bucket >= n, else n itself (eager)."""
    return next((b for b in buckets if b >= n), n)


def expected_padded(dist: Mapping[int, float], buckets: Sequence[int]) -> float:
    return sum(p * padded(n, buckets) for n, p in dist.items())


def plan(dist: Mapping[int, float], *, max_buckets: int, max_bs: int) -> list[int]:
    """The bucket list (always ending at max_bs, as SGLang appends it) with the least expected
    padded batch among lists of at most `max_buckets` sizes. Raises ValueError."""
    if max_buckets < 1:
        raise ValueError("at least one graph (max_bs itself) is needed")
    sizes = sorted(n for n in dist if n <= max_bs)
    cand = [*[n for n in sizes if n < max_bs], max_bs]
    prob = [dist.get(c, 0.0) for c in cand]
    m = len(cand)
    prefix = [0.0]
    for p in prob:
        prefix.append(prefix[-1] + p)

    def cover(i: int, j: int) -> float:  # sizes in (cand[i-1], cand[j]] padded to cand[j]
        return cand[j] * (prefix[j + 1] - prefix[i])

    k_max = min(max_buckets, m)
    inf = float("inf")
    best = [[inf] * (k_max + 1) for _ in range(m)]
    back = [[-1] * (k_max + 1) for _ in range(m)]
    for j in range(m):
        best[j][1] = cover(0, j)
        for t in range(2, min(j + 1, k_max) + 1):
            for i in range(t - 2, j):
                v = best[i][t - 1] + cover(i + 1, j)
                if v < best[j][t] - 1e-12:
                    best[j][t], back[j][t] = v, i
    # fewest graphs on a tie (rounded: float sums of the same cost differ in the last bits)
    t = min(range(1, k_max + 1), key=lambda k: (round(best[m - 1][k], 9), k))
    out, j = [], m - 1
    while j >= 0 and t >= 1:
        out.append(cand[j])
        j, t = back[j][t], t - 1
    return sorted(out)


@dataclass(frozen=True)
class Evaluation:
    name: str
    buckets: tuple[int, ...]
    tok_s: float  # expected decode throughput at the observed distribution
    mean_step_ms: float
    expected_padding: float  # mean padded slots per step
    waste_by_bucket: dict[int, float]  # bucket -> mean padded (wasted) slots it contributes
    graphs: int
    graph_memory_mb: float | None
    eager_share: float  # share of steps above the largest bucket

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "buckets": list(self.buckets),
            "tok_s": round(self.tok_s, 1),
            "mean_step_ms": round(self.mean_step_ms, 3),
            "expected_padding": round(self.expected_padding, 3),
            "waste_by_bucket": {str(k): round(v, 4) for k, v in self.waste_by_bucket.items()},
            "graphs": self.graphs,
            "graph_memory_mb": self.graph_memory_mb,
            "eager_share": round(self.eager_share, 4),
        }


def evaluate(
    name: str,
    dist: Mapping[int, float],
    buckets: Sequence[int],
    law: StepLaw,
    graph_mb: float | None = None,
) -> Evaluation:
    bks = sorted(set(buckets))
    waste: dict[int, float] = {b: 0.0 for b in bks}
    step = tokens = eager = 0.0
    for n, p in dist.items():
        pad = padded(n, bks)
        step += p * law.step_ms(pad)
        tokens += p * n
        if pad in waste and pad >= n:
            waste[pad] += p * (pad - n)
        else:
            eager += p
    return Evaluation(
        name,
        tuple(bks),
        1000.0 * tokens / step,
        step,
        sum(p * (padded(n, bks) - n) for n, p in dist.items()),
        waste,
        len(bks),
        None if graph_mb is None else round(graph_mb * len(bks), 1),
        eager,
    )


def graph_budget(max_buckets: int, graph_mb: float | None, memory_mb: float | None) -> int:
    """Graphs allowed: the count budget, and the memory budget at `graph_mb` per graph."""
    if memory_mb is None or graph_mb is None or graph_mb <= 0:
        return max_buckets
    return max(1, min(max_buckets, int(memory_mb // graph_mb)))


@dataclass(frozen=True)
class GraphMemory:
    """The graph memory per bucket the plan uses, and where it came from (said to the user)."""

    mb_per_graph: float | None
    source: str  # "option" (--graph-mb), "observed" (the decode's gauge), "none"
    sentence: str


def graph_memory_estimate(
    option_mb: float | None, observed_gb: float | None, captured: int | None
) -> GraphMemory:
    """The decode's own sglang:graph_memory_usage_gb{phase="decode"} (the total of its captured
    graphs on one GPU) over the graphs it captured, when observed (a measurement beats a guess);
    else --graph-mb, the user's estimate. Per graph is a linear model: graphs share one memory
    pool, so the largest size weighs most (vLLM #7894); the memory of a plan is an estimate."""
    if observed_gb and captured:
        mb = round(observed_gb * 1024 / captured, 2)
        over = f"; --graph-mb {option_mb:g} not used" if option_mb is not None else ""
        return GraphMemory(
            mb,
            "observed",
            f"graph memory: {mb:g} MB per graph, observed (the decode "
            f"reports {observed_gb:g} GB for its {captured} captured decode graphs in "
            f"sglang:graph_memory_usage_gb){over}",
        )
    why = (
        f"the decode reports {observed_gb:g} GB in sglang:graph_memory_usage_gb but not how many "
        "graphs (no decode_cuda_graph_bs in /server_info)"
        if observed_gb
        else 'no sglang:graph_memory_usage_gb{phase="decode"} observed'
    )
    if option_mb is not None:
        return GraphMemory(
            option_mb,
            "option",
            f"graph memory: {option_mb:g} MB per graph, " f"--graph-mb (your estimate; {why})",
        )
    return GraphMemory(None, "none", f"graph memory: unknown ({why}); --graph-mb MB sets a budget")
