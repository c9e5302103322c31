"""Preflight: can this deployment start on the target? Problems come back as plain sentences.

Checks, on the target: the work directory is writable; every port the new components bind is
free or held only by our own components (which the deploy stops first); the GPUs the workers
use exist and are not used by someone else; the kernel package the profile names is present; an
SMG router's interpreter (its own venv, docs/profiles.md) is there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dsv4ops.deployment import START_ORDER, WORKERS, Deployment, argv_value
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.remote.results import PreflightReport
from dsv4ops.routerkind import RouterKind


def worker_gpus(deployment: Deployment) -> list[int]:
    """GPU indices the workers use: --base-gpu-id .. + --tp-size (sglang's defaults 0 and 1)."""
    gpus: set[int] = set()
    for c in deployment.in_order(WORKERS):
        base = int(argv_value(c.argv, "--base-gpu-id") or 0)
        tp = int(argv_value(c.argv, "--tp-size") or argv_value(c.argv, "--tp") or 1)
        gpus.update(range(base, base + tp))
    return sorted(gpus)


def kernel_package_paths(
    deployment: Deployment, workdir: str, *, verified: bool = False
) -> list[str]:
    """Paths that must exist on the target for the profile's kernel package.

    SGLang finds tuned MoE configs through SGLANG_MOE_CONFIG_DIR; when the workers' env names
    it, that directory is the package. Otherwise <workdir>/kernels/<name>/<version>, unless
    `verified` (the package's files are checked against its manifest instead, which is stricter).
    """
    if not deployment.kernel_package:
        return []
    dirs = {
        c.env["SGLANG_MOE_CONFIG_DIR"]
        for c in deployment.in_order(WORKERS)
        if c.env.get("SGLANG_MOE_CONFIG_DIR")
    }
    if dirs or verified:
        return sorted(dirs)
    name, _, version = deployment.kernel_package.partition("@")
    return [f"{workdir.rstrip('/')}/kernels/{name}/{version or 'current'}"]


def preflight_problems(
    control: TargetControl,
    deployment: Deployment,
    components: Sequence[str] = START_ORDER,
    *,
    package_present: Callable[[str], bool] | None = None,
) -> list[str]:
    """Sentences describing why the deployment cannot start; empty when it can.

    `package_present` ("name@version" -> installed and intact, kernels.package_present on the
    target) replaces the bare directory check for the profile's kernel package when given.
    """
    ports = sorted(
        {p for c in deployment.in_order() if c.name in components for p in (c.ports or (c.port,))}
    )
    gpus = worker_gpus(deployment) if set(components) & set(WORKERS) else []
    ref = deployment.kernel_package
    verify = package_present is not None and bool(ref)
    paths = kernel_package_paths(deployment, control.workdir, verified=verify)
    router_python = smg_interpreter(deployment, components)
    report = control.preflight(ports, gpus, [*paths, *router_python])
    problems = []
    if not report.writable:
        problems.append(
            f"work directory {report.workdir} is not writable ({report.writable_error})"
        )
    for port, use in sorted(report.ports.items()):
        if use.in_use and not use.ours:
            who = ", ".join(f"pid {pid}" for pid, _ in use.holders) or "another process"
            problems.append(f"port {port} is in use by {who}, not by a dsv4ops component")
    if any(use.in_use and not use.ours for use in report.ports.values()) and deployment.target:
        # The ports are the profile's shifted by the target's port_offset: that is the knob.
        problems.append(
            f"to run beside it, change `port_offset` of target {deployment.target} in "
            "profiles/targets.yaml (every port of the unit moves with it)"
        )
    problems += _gpu_problems(control, report)
    for path, exists in report.paths.items():
        if not exists and path in router_python:
            problems.append(
                f"the router ({RouterKind.SMG.label}) runs from {path}, which is not on the "
                "target: build SMG's venv there (`make install` builds .venv-smg) or name it "
                "with the target's `smg_python` in profiles/targets.yaml"
            )
        elif not exists:
            problems.append(
                f"kernel package {deployment.kernel_package} is not installed on the target ({path})"
            )
    if verify and package_present is not None and ref and not package_present(ref):
        problems.append(
            f"kernel package {ref} is not installed on the target, or its files do not match its "
            f"manifest; install it with `dsv4ops kernels deploy ARTIFACT` first"
        )
    return problems


def smg_interpreter(deployment: Deployment, components: Sequence[str]) -> list[str]:
    """The interpreter an SMG router starts with, when it starts and is named by path: it lives
    in SMG's own venv, which a target may lack (a deploy would stop the pair, then fail to start
    the router). A bare `python3` is looked up on the target's PATH and not checked here."""
    if "router" not in components or deployment.router_kind is not RouterKind.SMG:
        return []
    python = deployment.component("router").argv[0]
    return [python] if python.startswith("/") else []


def _gpu_problems(control: TargetControl, report: PreflightReport) -> list[str]:
    """GPUs the unit needs that do not exist, or that other processes hold."""
    problems: list[str] = []
    if report.gpus_available:
        if report.gpus_missing:
            problems.append(f"GPUs {list(report.gpus_missing)} do not exist on {report.host}")
        ours_alive = any(s.alive for s in control.status(list(WORKERS)).values())
        busy = {i: pids for i, pids in report.gpus_busy.items() if pids}
        if busy and not ours_alive:
            # With none of our workers running, anything on these GPUs belongs to someone else.
            problems.append(
                "GPUs in use by other processes: "
                + ", ".join(
                    f"GPU {i} (pids {', '.join(map(str, p))})" for i, p in sorted(busy.items())
                )
            )
    return problems
