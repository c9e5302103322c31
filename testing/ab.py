"""Test helpers and doubles for `dsv4ops.ab` (one module per package area).

- profiles: Profiles for the A/B tests on the twin (testing/orchestrate.py): the shipped ones with
the decode's metrics published every 10 decode steps instead of 40, so the sweep's short levels
span whole log intervals and the A/B can use the server's own accounting; and the twin settings
those tests run at.
- twin_blocks: A/B blocks measured on the twin's REAL decode performance model, in-process, on a fake clock.

No servers: each block runs `steps` decode steps per concurrency level through
`dsv4ops.twin.perf.step_ms` (buckets, overlap) times `StepVariation.factor()` (the twin's seeded
step noise and its drift since the experiment's epoch), with the model time advancing over the
block's measured part and the switch between blocks (restart + graph capture) on a fake clock.
That is the twin's truth (perf.py) and its variation, without the load generator's own noise.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dsv4ops.ab.model import FIT_LEVEL, Arm, BlockResult
from dsv4ops.twin.config import TwinConfig
from dsv4ops.twin.perf import StepVariation, step_ms
from testing.orchestrate import OrchEnv, commit_all

# --- profiles (was testing/ab.py) ---

# Model time x 0.5: slow enough that the client and the twin keep up with 60 streams on a loaded 2-core
# machine. Every block restarts the unit: the schedulers' exit after ShutdownReq and the SIGTERM
# watchdog's tick (3 s and 5 s model time by default) are cut to keep a block near 8 s.
AB_TWIN_ENV = {
    "DSV4_TWIN_TIME_SCALE": "0.5",
    "DSV4_TWIN_SCHEDULER_EXIT_S": "0.5",
    "DSV4_TWIN_SIGTERM_TICK_S": "0.5",
}
# Short sweep requests: the staircase's drain after the last level waits for them.
AB_WORKLOAD = {"sweep_max_tokens": 64}
# The twin's deploy-to-deploy variation in the A/B tests: 0.5% per start, seeded per start (the
# counter), while the tests state twice that (`--variation 1`) as an operator who measured
# the box would; a stated bound below the truth is what the design cannot survive (docs/ab.md).
AB_DEPLOY_VARIATION_PCT = 0.5


def ab_twin_env(root: Path, *, time_scale: float | None = None) -> dict[str, str]:
    """AB_TWIN_ENV with the seeded deploy-to-deploy variation, its start counter under `root`
    (`time_scale`: the twin's, instead of AB_TWIN_ENV's)."""
    scale = {} if time_scale is None else {"DSV4_TWIN_TIME_SCALE": str(time_scale)}
    return {
        **AB_TWIN_ENV,
        **scale,
        "DSV4_TWIN_DEPLOY_VARIATION_PCT": str(AB_DEPLOY_VARIATION_PCT),
        "DSV4_TWIN_DEPLOY_SEED": "22",
        "DSV4_TWIN_DEPLOY_COUNTER": str(root / "decode-starts"),
    }


VARIANTS = {"ab-base": "baseline", "ab-overlap": "overlap-on", "ab-step4": "buckets-step4"}


def add_ab_profiles(env: OrchEnv) -> None:
    """Write and commit the A/B variants (each extends the shipped profile of its name)."""
    for name, base in VARIANTS.items():
        (env.profiles_dir / f"{name}.yaml").write_text(
            f"schema_version: 1\nextends: {base}\n"
            f"description: {base} with decode metrics every 5 steps (A/B tests)\n"
            "decode:\n  extra_args: [--decode-log-interval, '5', --context-length, '1048576']\n"
        )
    commit_all(env, "A/B test profiles")


# --- twin_blocks (was testing/ab.py) ---

SEEDS = TwinConfig()


@dataclass(frozen=True)
class ArmModel:
    profile: str
    buckets: tuple[int, ...]
    overlap: bool = False
    step_scale: float = 1.0  # a synthetic effect: every step takes this factor of the law's time


def startup_s(arm: ArmModel, cfg: TwinConfig = SEEDS) -> float:
    """The twin's modelled start-up (docs/twin.md): load + capture per bucket + warm-up."""
    return cfg.model_load_s + cfg.capture_s_per_bucket * len(arm.buckets) + cfg.warmup_s


@dataclass
class _Clock:
    t: float = 0.0

    def __call__(self) -> float:
        return self.t


@dataclass
class TwinBlocks:
    """Measure a schedule's blocks. `block_s`: the measured part of a block (model seconds),
    spread evenly over the concurrency levels; drift counts from the first block's start."""

    arms: dict[Arm, ArmModel]
    concurrencies: Sequence[int] = (60,)
    steps: int = 200
    block_s: float = 180.0
    noise_pct: float = 2.0
    drift_pct_per_min: float = 0.0
    seed: int = 0
    # Deploy-to-deploy variation (sd, percent of every step of a block): the twin has none, the box
    # some (GPU clocks, memory layout after a restart); benchmarks/ab_time_to_decision.py varies it.
    block_sd_pct: float = 0.0
    cfg: TwinConfig = field(default_factory=TwinConfig)

    def run(self, schedule: Sequence[Arm]) -> list[BlockResult]:
        clock = _Clock()
        var = StepVariation(
            noise_pct=self.noise_pct,
            drift_pct_per_min=self.drift_pct_per_min,
            epoch=0.0,
            time_scale=1.0,
            seed=self.seed,
            clock=clock,
        )
        rng = random.Random(f"block-sd:{self.seed}")
        out = []
        for i, arm_name in enumerate(schedule):
            arm = self.arms[arm_name]
            clock.t += startup_s(arm, self.cfg)  # the switch: this arm's deploy and capture
            start = clock.t
            block = (
                max(0.5, 1 + rng.gauss(0, self.block_sd_pct / 100)) if self.block_sd_pct else 1.0
            )
            values = {c: self._level(arm, c, clock, var, block) for c in self.concurrencies}
            fit = _fit([(c, values[c]["step_mean_ms"]) for c in self.concurrencies])
            for v in values.values():
                v.pop("step_mean_ms")
            if fit:
                values[FIT_LEVEL] = {"step_a_ms": fit[0], "step_b_ms": fit[1]}
            out.append(
                BlockResult(
                    i, arm_name, arm.profile, f"op-{i}", f"t+{start:.0f}s", clock.t - start, values
                )
            )
        return out

    def _level(
        self, arm: ArmModel, c: int, clock: _Clock, var: StepVariation, block: float
    ) -> dict[str, float]:
        dt = self.block_s / len(self.concurrencies) / self.steps
        hidden = self.cfg.overlap_hidden_ms if arm.overlap else 0.0
        law = step_ms(
            c, list(arm.buckets), a=self.cfg.step_a_ms, b=self.cfg.step_b_ms, hidden_ms=hidden
        )
        steps = []
        for _ in range(self.steps):
            steps.append(law * arm.step_scale * block * var.factor())
            clock.t += dt
        steps.sort()
        mean = statistics.fmean(steps)
        return {
            "output_tok_s": 1000.0 * c / mean,
            "itl_p50_ms": statistics.median(steps),
            "itl_p99_ms": steps[min(len(steps) - 1, int(0.99 * len(steps)))],
            "step_mean_ms": mean,
        }


def _fit(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least squares step = a + b·running over the block's levels (None below two levels)."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b
