"""The decode performance model: CUDA-graph buckets and the step law (pure functions).

step_ms = a + b * padded_bs (- overlap_hidden_ms with the overlap scheduler), where padded_bs is
the smallest captured bucket >= the running batch; above the largest bucket the batch runs eager
at its own size, the whole step times the eager factor. Seeds: a = 18 ms, b = 1.05 ms/request,
~5 ms hidden by overlap.
"""

from __future__ import annotations

import bisect
import os
import random
import time
from collections.abc import Callable

DSV4_DEFAULT_MAX_RUNNING = 256  # deepseek_v4_hook.py:138-146
# Graph memory per captured decode bucket, GB per GPU: an estimate (TensorRT-LLM measured ~10 MiB of
# metadata per graph for DeepSeek-R1; DSA-style models more). memory.py turns it into what
# /server_info's memory_usage.graph and /metrics' sglang:graph_memory_usage_gb{phase} report.
GRAPH_GB_PER_DECODE_BUCKET = 0.02


def default_decode_buckets(max_bs: int) -> list[int]:
    """SGLang's generate_decode_cuda_graph_batch_sizes (normal, non-speculative case)."""
    sizes = [1, 2, 4, 8, 12]
    sizes += list(range(16, 257, 8))
    sizes += list(range(272, 497, 16))
    sizes += list(range(512, max_bs + 1, 32))
    sizes = [s for s in sizes if s <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def resolve_decode_buckets(
    *,
    explicit: tuple[int, ...] | None,
    max_bs: int | None,
    max_running_requests: int | None,
    tp_size: int,
    disable_padding: bool,
    disabled: bool,
) -> list[int]:
    """The captured decode batch sizes, as /server_info reports them in decode_cuda_graph_bs."""
    if disabled:
        return []
    if explicit:
        return sorted(set(explicit))
    if max_bs is None:
        # memory_hook.py: a 96 GB (< 160 GiB) GPU gets 512 with tp >= 4, else 256; clamped to a
        # lower --max-running-requests.
        max_bs = 512 if tp_size >= 4 else 256
        if max_running_requests is not None and max_running_requests < max_bs:
            max_bs = max_running_requests
    sizes = list(range(1, max_bs + 1)) if disable_padding else default_decode_buckets(max_bs)
    # Runtime clamp by the request pool (base_cuda_graph_runner.py:65-109).
    pool = max_running_requests or DSV4_DEFAULT_MAX_RUNNING
    kept = [s for s in sizes if s <= pool]
    if sizes and sizes[-1] > pool and pool not in kept:
        kept.append(pool)
    return kept


def padded_batch(running: int, buckets: list[int]) -> int:
    """The batch the GPU actually runs: the smallest bucket >= running, else running (eager)."""
    if running <= 0:
        return 0
    i = bisect.bisect_left(buckets, running)
    return buckets[i] if i < len(buckets) else running


def step_ms(
    running: int,
    buckets: list[int],
    *,
    a: float,
    b: float,
    hidden_ms: float,
    eager_factor: float = 1.0,
) -> float:
    """Model milliseconds of one decode step for `running` requests (0 when idle). A batch no
    captured graph holds (above the largest bucket; every batch with graphs off) runs eager:
    the step times `eager_factor`, never its padding-free law alone, which was faster than the
    graph (sglang#33900: ~4x per token on a small model; #40346: ~2x on sm_120)."""
    if running <= 0:
        return 0.0
    law = max(a - hidden_ms, 0.0) + b * padded_batch(running, buckets)
    eager = not buckets or running > buckets[-1]
    return law * eager_factor if eager else law


class StepVariation:
    """Optional, seeded variation of the step time (off by default: the seeds' law exactly).

    The box's step time is not a constant: it jitters step to step and drifts over an afternoon
    (clocks, temperature, other tenants of the host). A/B statistics are only proven on a twin
    that does the same, so `dsv4ops ab` tests can check that a known effect is recovered with its
    interval and that counterbalanced blocks cancel drift.

    * noise: each step is multiplied by 1 + N(0, noise_pct/100), clipped to [0.5, 2], drawn from
      its own seeded stream (enabling it changes no other random choice of the twin);
    * drift: steps are slower by drift_pct_per_min percent per MODEL minute since `epoch` (unix
      seconds). The epoch outlives restarts: give every twin of an experiment the same one
      (DSV4_TWIN_DRIFT_EPOCH), or each process starts its own drift at zero.
    """

    def __init__(
        self,
        *,
        noise_pct: float,
        drift_pct_per_min: float,
        epoch: float | None,
        time_scale: float,
        seed: int,
        clock: Callable[[], float] = time.time,
        offset: float = 1.0,
    ) -> None:
        self.offset = offset  # this start's deploy-to-deploy factor (deploy_offset)
        self.noise = noise_pct / 100.0
        self.drift = drift_pct_per_min / 100.0
        self.time_scale = time_scale
        self._clock = clock
        self.epoch = clock() if epoch is None else epoch
        self._rng = random.Random(f"step-noise:{seed}")

    @property
    def active(self) -> bool:
        return bool(self.noise or self.drift or self.offset != 1.0)

    def factor(self) -> float:
        """The multiplier for the next step's model time."""
        f = self.offset
        if self.drift:
            model_min = max(self._clock() - self.epoch, 0.0) / self.time_scale / 60.0
            f *= 1.0 + self.drift * model_min
        if self.noise:
            f *= min(max(1.0 + self._rng.gauss(0.0, self.noise), 0.5), 2.0)
        return f


def deploy_offset(variation_pct: float, seed: int, counter: str | None) -> tuple[float, int]:
    """(this start's step-law factor, its start index): 1 + N(0, variation_pct/100), clipped to
    [0.5, 2], drawn from its own stream seeded by (seed, the start index).

    The box's step time differs from one start to the next (GPU clocks, memory layout, which
    kernels autotuning picked): a per-start offset that stays for the whole process. The start
    index is the number of starts counted before in the file `counter` (one line appended per
    start), so a test's sequence of restarts draws the same offsets every run; without a counter
    every start draws from a fresh, unseeded index, as the box does."""
    if variation_pct <= 0:
        return 1.0, 0
    if counter:
        fd = os.open(counter, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            with os.fdopen(fd, "a+", encoding="utf-8") as fh:
                fh.seek(0)
                index = sum(1 for line in fh if line.strip())
                fh.write(f"{os.getpid()}\n")
        except OSError:
            index = 0
    else:
        index = time.time_ns()
    rng = random.Random(f"deploy-offset:{seed}:{index}")
    return min(max(1.0 + rng.gauss(0.0, variation_pct / 100.0), 0.5), 2.0), index
