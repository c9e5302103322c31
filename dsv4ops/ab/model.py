"""The data an A/B experiment produces: one BlockResult per block of the schedule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from dsv4ops.jsontypes import JSONValue

Arm = Literal["A", "B"]
ARMS: tuple[Arm, Arm] = ("A", "B")

METRICS: tuple[str, ...] = (
    "output_tok_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "step_a_ms",
    "step_b_ms",
)  # step law step ≈ a + b·bs, fitted per block
HIGHER_IS_BETTER = {"output_tok_s"}  # every other metric: lower is better
# Reported with verdicts but never a reason to reject B: the fitted law describes the step, and a
# bucket change legitimately trades its intercept for its slope (step-4 vs step-8 over the running
# batch: a larger a, a smaller b). Throughput and latency say whether the trade paid.
DIAGNOSTIC_METRICS = {"step_a_ms", "step_b_ms"}

# The step law is fitted over all concurrency levels of a block, so it belongs to no one level:
# a block keeps step_a_ms / step_b_ms under this key of `values` (analysed like a level).
FIT_LEVEL = 0


def higher_is_better(metric: str) -> bool:
    return metric in HIGHER_IS_BETTER


class BlockRecord(TypedDict):
    """A block as the experiment's report and `ab --json` record it (BlockResult.to_record)."""

    index: int
    arm: Arm
    profile: str
    deploy_op: str | None
    started_at: str
    duration_s: float
    complete: bool
    values: dict[str, dict[str, float]]  # concurrency (a string: a JSON key) -> metric -> value


@dataclass(frozen=True)
class BlockResult:
    index: int  # 0-based position in the schedule (time order)
    arm: Arm
    profile: str  # profile name
    deploy_op: str | None  # journal op id of the deploy that put this arm on the box
    started_at: str  # ISO-8601 UTC
    duration_s: float  # measured part only (after warm-up)
    values: dict[int, dict[str, float]] = field(
        default_factory=dict
    )  # concurrency -> metric -> value
    complete: bool = True  # False: the block was interrupted; its values are partial

    def value(self, concurrency: int, metric: str) -> float | None:
        """The finite value of `metric` at `concurrency`, or None when absent."""
        v = self.values.get(concurrency, {}).get(metric)
        return v if v is not None and math.isfinite(v) else None

    def to_record(self) -> BlockRecord:
        return {
            "index": self.index,
            "arm": self.arm,
            "profile": self.profile,
            "deploy_op": self.deploy_op,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "complete": self.complete,
            "values": {str(c): dict(m) for c, m in sorted(self.values.items())},
        }

    @classmethod
    def from_record(cls, d: Mapping[str, JSONValue]) -> BlockResult:
        """The inverse of to_record; raises ValueError on a malformed record."""
        try:
            arm = d["arm"]
            if arm not in ARMS:
                raise ValueError(f"arm must be A or B, not {arm!r}")
            raw = d.get("values", {})
            if raw is None:
                raw = {}
            if not isinstance(raw, dict):
                raise ValueError(f"values must be a mapping of concurrency to metrics, not {raw!r}")
            values = {int(c): {str(k): float(v) for k, v in m.items()} for c, m in raw.items()}
            return cls(
                index=int(d["index"]),
                arm=arm,
                profile=str(d["profile"]),
                deploy_op=d.get("deploy_op"),
                started_at=str(d.get("started_at", "")),
                duration_s=float(d.get("duration_s", 0.0)),
                values=values,
                complete=bool(d.get("complete", True)),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a block record: {exc}") from None
