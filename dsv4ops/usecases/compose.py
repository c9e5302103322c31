"""The pieces every PD use case binds to its target: readiness limits, the served model name,
the kernels pipeline's checks and the Operator."""

from __future__ import annotations

import math
import os

from dsv4ops.deployment import Component
from dsv4ops.errors import DsOpsError
from dsv4ops.orchestrate.engine import CanaryStep, Progress
from dsv4ops.orchestrate.kernelpkg import KernelSupport, config_dir_env
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.orchestrate.timeouts import Timeouts
from dsv4ops.profiles.model import Target
from dsv4ops.sglang_paths import moe_path, sparse_attn_asked
from dsv4ops.timings import (
    DRAIN_S,
    PROBE_REQUEST_S,
    TWIN_DRAIN_S,
    TWIN_PROBE_REQUEST_S,
    TWIN_READY_S,
    TWIN_STOP_GRACE_S,
)
from dsv4ops.usecases.session import TargetSession

READY_TIMEOUT_ENV = "DSV4OPS_READY_TIMEOUT_S"


def timeouts_for(target: Target) -> Timeouts:
    """Readiness limits: minutes on the real box (weights load), 2 min on the twin (values and
    why: dsv4ops/timings.py). The stop grace is each component's, as deployed; the twin and the
    override cut it.

    Raises DsOpsError (exit 1, one line) when DSV4OPS_READY_TIMEOUT_S is not a positive number:
    a typo there must not become a traceback, nor silently the defaults.
    """
    override = os.environ.get(READY_TIMEOUT_ENV)
    if override:
        try:
            s = float(override)
        except ValueError:
            s = -1.0
        if not (math.isfinite(s) and s > 0):
            raise DsOpsError(
                f"{READY_TIMEOUT_ENV}={override!r} is not a positive number of seconds",
                hint=f"unset it or set e.g. {READY_TIMEOUT_ENV}=60",
            )
        return Timeouts(
            ready_s={"prefill": s, "decode": s, "router": s},
            stop_grace_cap_s=s,
            drain_s=min(DRAIN_S, s),
            probe_request_s=min(PROBE_REQUEST_S, s),
        )
    if target.launcher == "twin":
        return Timeouts(
            ready_s=dict(TWIN_READY_S),
            stop_grace_cap_s=TWIN_STOP_GRACE_S,
            drain_s=TWIN_DRAIN_S,
            probe_request_s=TWIN_PROBE_REQUEST_S,
        )
    return Timeouts()


def decode_uses_package(
    server_info: str, log_tail: str, expected: str, decode: Component | None = None
) -> tuple[bool, str]:
    """kernels.loaded_check bound to the decode's argv and env (KernelSupport.loaded): the MoE
    path they select, and whether they switch the sparse decode attention on; then "in use"
    also means a decode call took the package's kernel (kernels/loaded.py), which the deploy
    gate requires and status reports."""
    from dsv4ops import kernels as K

    moe = moe_path(decode.argv, dict(decode.env)) if decode is not None else None
    attention = decode is not None and sparse_attn_asked(dict(decode.env))
    check = K.loaded_check(server_info, log_tail, expected=expected, moe=moe, attention=attention)
    return bool(check.used), check.reason if check.used else f"{check.state}: {check.reason}"


def kernel_support(session: TargetSession) -> KernelSupport:
    """The kernels pipeline's checks, bound to this target, for the deploy path (kernelpkg.py)."""
    from dsv4ops import kernels as K

    sup, workdir = session.supervisor, session.target.workdir
    return KernelSupport(
        present=lambda ref: bool(K.package_present(sup, workdir, ref)),
        env_for=lambda ref: config_dir_env(sup.read_state("kernels"), workdir, ref),
        loaded=decode_uses_package,
    )


def operator_for(
    session: TargetSession,
    *,
    progress: Progress,
    canary: CanaryStep | None,
    model: str,
    command: str,
    accept_inconclusive: bool = False,
) -> Operator:
    """The Operator of a deploy, rollback or stop on the session's target. The deployment the
    journal records running is read first (the drain and stop use it): a field of its record
    that does not fit raises RecordedSettingError here, before any operation begins."""
    current = session.journal.deployed()
    if current is not None and current.components:
        current.deployment()
    target = session.target
    host = target.ssh.host if target.ssh else "localhost"
    return Operator(
        session.supervisor,
        session.journal,
        host=f"{target.name} ({host})",
        clock=session.clock,
        progress=progress,
        timeouts=timeouts_for(target),
        canary=canary,
        model=model,
        command=command,
        accept_inconclusive=accept_inconclusive,
        kernels=kernel_support(session),
        waits=session.waits,
    )
