"""Plans: pure functions from a Deployment to the ordered list of steps a deploy/stop runs.

The engine executes exactly these steps, and `--dry-run` prints them with the exact commands,
so what is shown is what runs. The safe order (issue 4):
drain (SIGTERM the router: sglang-router 0.3.2 stops accepting at once and lets in-flight
streams finish; watch the workers' running/queued requests while it does) -> stop router (SIGKILL
only if it outlived the drain bound) -> stop decode -> stop prefill (each: SIGTERM to the server
process, SGLang's own graceful shutdown, then the group) -> start prefill (ready = HTTP /health
200 after warmup) -> start decode (/health 200) -> start router (/readiness 200, not the
liveness /health) -> end-to-end probe through the router -> canary -> mark known-good.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dsv4ops.deployment import START_ORDER, STOP_ORDER, Deployment
from dsv4ops.remote.base import redact_argv, redact_env

# Step actions. Those in MUTATING change what runs on the target.
PREFLIGHT, LOCK, RECORD, STOP, DRAIN, START, WAIT, KERNELS, PROBE, CANARY, MARK, UNLOCK = (
    "preflight",
    "lock",
    "record",
    "stop",
    "drain",
    "start",
    "wait",
    "kernels",
    "probe",
    "canary",
    "mark",
    "unlock",
)
MUTATING = frozenset({STOP, START})
# Steps that change nothing on the target: their done record may ride the next step's start
# record (Journal.step's defer). A start's says what it did (the pid it started), the evidence
# that a process is this operation's, so it is written before anything else is done.
OBSERVING = frozenset({WAIT, PROBE, CANARY})
# The bracket of an operation: done by the operator and the journaled-operation context
# (operation.py) around the steps the engine runs; listed in the plan so --dry-run shows them.
BRACKET = frozenset({PREFLIGHT, LOCK, RECORD, MARK, UNLOCK})


@dataclass(frozen=True)
class Step:
    action: str
    title: str
    component: str | None = None
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    checks: tuple[str, ...] = ()  # URLs a WAIT step polls, in order
    note: str = ""  # printed under the step in a plan: what its check does and does not prove

    def command_line(self) -> str:
        """The exact command, shell-quoted, secrets redacted (for printing only)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(redact_env(self.env).items()))
        cmd = shlex.join(redact_argv(self.argv))
        return f"{env} {cmd}".strip()


def ready_checks(deployment: Deployment, name: str) -> tuple[str, ...]:
    """URLs that must answer 200 before a component counts as ready.

    A worker is ready when its HTTP `/health` answers 200: SGLang opens the HTTP port only after
    model load and CUDA-graph capture and answers 503 until the warmup is done. The prefill's
    bootstrap server proves nothing: it starts before the model loads and its `/health` is 200
    from then on (sglang engine.py L1336-1350, disaggregation/common/conn.py L3075).
    """
    c = deployment.component(name)
    if name == "router":
        # The router's /health is liveness only; /readiness says both workers are healthy.
        return (c.url("/readiness"),)
    return (c.url("/health"),)


DRAIN_ROUTER = (
    "drain: SIGTERM the router (no new requests; in-flight streams finish), "
    "watch the workers' running/queued requests"
)
DRAIN_WORKERS = "wait for in-flight requests on the workers to finish"


def stop_steps(components: Sequence[str] = START_ORDER) -> list[Step]:
    """Drain, then stop in the safe order (router, decode, prefill), limited to `components`.

    The drain comes first and is the router's own graceful shutdown: stopping the router before
    waiting would cut every client stream, and a burst of client disconnects is an abort cascade
    on the old decode (the overlap-scheduler wedge trigger of the seeds). Without the router in
    scope nothing stops the traffic, so the drain only waits (bounded) for the workers.
    """
    steps: list[Step] = []
    if "router" in components:
        steps.append(Step(DRAIN, DRAIN_ROUTER, "router"))
    else:
        steps.append(Step(DRAIN, DRAIN_WORKERS))
    for name in STOP_ORDER:
        if name in components:
            steps.append(Step(STOP, f"stop {name}", name))
    return steps


# SGLang 0.5.23 opens the HTTP port only after model load and CUDA-graph capture and answers
# /health 503 through warmup; the prefill's bootstrap server answers /health 200 from process
# start, before the model loads, so it is never the readiness check.
WORKER_READY_NOTE = (
    "the HTTP server: open after load and CUDA-graph capture, 200 only after "
    "warmup; not the bootstrap server, whose /health is 200 before the model loads"
)


def start_steps(deployment: Deployment, components: Sequence[str] = START_ORDER) -> list[Step]:
    steps: list[Step] = []
    for name in START_ORDER:
        if name not in components:
            continue
        c = deployment.component(name)
        steps.append(Step(START, f"start {name}", name, argv=c.argv, env=dict(c.env)))
        checks = ready_checks(deployment, name)
        # /health is 503 through the warmup, so its 200 means warmed up
        what = "/readiness 200" if name == "router" else "/health 200"
        steps.append(
            Step(
                WAIT,
                f"wait until {name} is ready ({what})",
                name,
                checks=checks,
                note="" if name == "router" else WORKER_READY_NOTE,
            )
        )
        if name == "decode" and deployment.kernel_package:
            # Before the router takes traffic: a decode on default MoE configs serves, slowly,
            # so only its /server_info and log can tell (docs/kernels.md "Was it used?").
            steps.append(
                Step(
                    KERNELS,
                    f"check decode loaded kernel package {deployment.kernel_package}",
                    name,
                    checks=(c.url("/server_info"),),
                )
            )
    return steps


def restart_steps(
    deployment: Deployment, components: Sequence[str] = START_ORDER, *, canary: bool = False
) -> list[Step]:
    """Stop, start in order, prove end to end, optionally canary (the path rollback reuses)."""
    steps = stop_steps(components) + start_steps(deployment, components)
    steps.append(Step(PROBE, "end-to-end probe: generations through the router"))
    if canary:
        steps.append(Step(CANARY, "canary: smoke + the suites the change calls for"))
    return steps


def restore_steps(deployment: Deployment) -> list[Step]:
    """The automatic rollback's restore of a known-good deployment (after everything stopped):
    start in order, wait ready, prove it end to end (no canary: it is known-good)."""
    return start_steps(deployment) + [Step(PROBE, "end-to-end probe of the restored deployment")]


def engine_steps(steps: Sequence[Step]) -> list[Step]:
    """The steps the engine runs, in the plan's order: the plan without its bracket."""
    return [s for s in steps if s.action not in BRACKET]


def deploy_plan(
    deployment: Deployment, components: Sequence[str] = START_ORDER, *, canary: bool = False
) -> list[Step]:
    """The full deploy: preflight, lock, journal, restart, mark known-good, unlock."""
    return (
        [
            Step(PREFLIGHT, "preflight: GPUs, ports, work directory, kernel package"),
            Step(LOCK, "take the target's deploy lock"),
            Step(RECORD, "journal the undo information"),
        ]
        + restart_steps(deployment, components, canary=canary)
        + [
            Step(MARK, f"mark {deployment.describe()} known-good"),
            Step(UNLOCK, "release the deploy lock"),
        ]
    )


def render_plan(steps: Sequence[Step]) -> list[str]:
    """Numbered, human-readable plan lines with the exact commands."""
    lines = []
    for i, s in enumerate(steps, start=1):
        lines.append(f"{i:2d}. {s.title}")
        if s.argv:
            lines.append(f"      $ {s.command_line()}")
        for url in s.checks:
            lines.append(f"      GET {url} -> 200")
        if s.note:
            lines.append(f"      ({s.note})")
    return lines


def plan_json(steps: Sequence[Step]) -> list[dict[str, object]]:
    return [
        {
            "action": s.action,
            "title": s.title,
            "component": s.component,
            "argv": redact_argv(s.argv) if s.argv else None,
            "env": redact_env(s.env) if s.env else None,
            "checks": list(s.checks) or None,
            "note": s.note or None,
        }
        for s in steps
    ]
