"""What switching the box to one arm of an A/B costs: the last timed deploy of that profile
on the target as the journal recorded it, else an estimate from its decode buckets (capture
time grows with the number of CUDA graphs). ab_plan.py sums it into the experiment's time."""

from __future__ import annotations

from dataclasses import dataclass

from dsv4ops.clock import seconds_between
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.usecases.deploy import DeployPlan
from dsv4ops.usecases.gate import buckets_of

# Without a timed deploy in the journal: a restart on the box (stop, weights, start) plus the
# capture per decode graph. The twin's own settings give its estimate (docs/twin.md).
BOX_RESTART_S = 300.0
BOX_CAPTURE_S_PER_BUCKET = 0.25
TWIN_DEFAULTS = {
    "MODEL_LOAD_S": 60.0,
    "CAPTURE_S_PER_BUCKET": 0.25,
    "WARMUP_S": 1.0,
    "TIME_SCALE": 1.0,
}
TWIN_OVERHEAD_S = 2.0  # router start, probe, stops: wall seconds, not scaled


@dataclass(frozen=True)
class Switch:
    seconds: float
    source: str  # "journal d-... (12.3 s)" or "estimate from N decode buckets"


def switch_cost(journal: Journal, plan: DeployPlan) -> Switch:
    """The last timed SUCCEEDED deploy of this profile on the target, else an estimate."""
    name = plan.deployment.profile_name
    # Through the journal's index: only SUCCEEDED deploys/rollbacks of this profile are read.
    for op in journal.operations().newest_first(
        kinds=(Kind.DEPLOY, Kind.ROLLBACK), status=Status.SUCCEEDED, profile={"name": name}
    ):
        if (
            op.kind in (Kind.DEPLOY, Kind.ROLLBACK)
            and op.status is Status.SUCCEEDED
            and op.profile_name == name
            and op.ended
        ):
            seconds = seconds_between(op.ts, op.ended)
            if seconds is not None:
                return Switch(seconds, f"journal {op.op}, {seconds:.1f} s")
    n = len(buckets_of(plan.deployment))
    target = plan.target
    if target.launcher == "twin":
        twin = dict(target.twin_env)
        env = {k: _float(twin.get(f"DSV4_TWIN_{k}"), v) for k, v in TWIN_DEFAULTS.items()}
        model_s = env["MODEL_LOAD_S"] + env["WARMUP_S"] + n * env["CAPTURE_S_PER_BUCKET"]
        return Switch(
            TWIN_OVERHEAD_S + model_s * env["TIME_SCALE"],
            f"estimate for the twin from {n} decode buckets",
        )
    return Switch(
        BOX_RESTART_S + n * BOX_CAPTURE_S_PER_BUCKET,
        f"estimate from {n} decode buckets (no timed deploy of {name} in the journal)",
    )


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default
