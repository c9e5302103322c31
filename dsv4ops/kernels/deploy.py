"""Verify, deploy, list and roll back kernel packages on a target, through the target agent.

Everything that can be refused locally is refused before the target is touched: archive rules
and checksums (`remote/agent/kernel_archive.py`, the same code the agent runs on the target),
the manifest schema and compatibility with what the target runs. The artifact is then copied to
`<workdir>/kernels/.incoming-*` and the agent's `kernels_install` re-verifies what it received,
unpacks to `<workdir>/kernels/<name>/<version>/`, swaps `current` atomically and records
`SGLANG_MOE_CONFIG_DIR` in `<workdir>/state/kernels.json` (Supervisor.read_state("kernels")
["env"]). Listing, rollback, the present check and the runtime probe are agent commands too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from dsv4ops.constants import BOX_ARCH, BOX_DEVICE_NAME, BOX_TRITON_VERSION
from dsv4ops.errors import KernelPackageError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels.manifest import Manifest, TargetRuntime, check_compatible, parse
from dsv4ops.localfiles import FileRefused, read_regular
from dsv4ops.remote.agent import kernel_archive
from dsv4ops.remote.base import Executor
from dsv4ops.remote.errors import AgentCallError
from dsv4ops.remote.supervisor import Supervisor

STATE_NAME = "kernels"  # <workdir>/state/kernels.json
_TIMEOUT_S = 120


@dataclass(frozen=True)
class Artifact:
    path: Path
    manifest: Manifest
    files: dict[str, bytes]


def open_artifact(path: Path) -> Artifact:
    """Read and fully verify an artifact locally; raises KernelPackageError on any refusal."""
    try:
        data = read_regular(Path(path), kernel_archive.MAX_ARCHIVE_BYTES, "artifact")
    except FileRefused as exc:
        raise KernelPackageError(f"{path}: {exc}") from None
    except OSError as exc:
        raise KernelPackageError(f"{path}: cannot read artifact: {exc.strerror}") from None
    try:
        top, files = kernel_archive.read_safe(data)
        raw = kernel_archive.verify_members(files)
    except kernel_archive.PackageError as exc:
        raise KernelPackageError(f"{path}: {exc}") from None
    manifest = parse(raw, f"{path}:manifest.json")
    if top != f"{manifest.name}-{manifest.version}":
        raise KernelPackageError(
            f"{path}: top directory {top!r} is not {manifest.name}-{manifest.version}"
        )
    return Artifact(Path(path), manifest, files)


def twin_runtime(twin_env: dict[str, str] | None = None) -> TargetRuntime:
    """A twin target stands in for the box: sm_120 and the box's triton unless its env says so."""
    triton = (twin_env or {}).get("DSV4_TWIN_TRITON_VERSION", BOX_TRITON_VERSION)
    return TargetRuntime(
        BOX_ARCH, triton, (BOX_DEVICE_NAME,), source="twin target, emulating the box"
    )


def probe_runtime(sup: Supervisor) -> TargetRuntime:
    """Ask the target (its python's triton, nvidia-smi's GPUs) through the agent; raises when unknown."""
    info = kernel_call(sup, "kernels_probe")
    host = sup.executor.host
    if not info["triton"] or not info["gpus"]:
        raise KernelPackageError(
            f"{host}: cannot tell which triton/GPU the target runs "
            f"(triton={info['triton']}, gpus={info['gpus']})"
        )
    cc = info["gpus"][0][1].replace(".", "")
    names = tuple(sorted({n.replace(" ", "_") for n, _ in info["gpus"]}))
    return TargetRuntime(f"sm_{cc}", info["triton"], names, source=f"probed on {host}")


def kernel_call(sup: Supervisor, op: str, **args: object) -> JSONObject:
    """One `kernels_*` agent command; any refusal or failure is a KernelPackageError."""
    try:
        return sup.call(op, timeout=_TIMEOUT_S, **args)
    except AgentCallError as exc:
        detail = exc.reply.get("error") if exc.kind == "package" else None
        raise KernelPackageError(str(f"{sup.executor.host}: {detail}" if detail else exc)) from None


def verify(artifact_path: Path, runtime: TargetRuntime | None = None) -> Artifact:
    """Checksums and archive rules; with `runtime`, compatibility too. Raises KernelPackageError."""
    artifact = open_artifact(artifact_path)
    if runtime is not None:
        check_compatible(artifact.manifest, runtime)
    return artifact


def deploy(
    executor: Executor, workdir: str, python: str, artifact_path: Path, runtime: TargetRuntime
) -> JSONObject:
    """Verify locally, upload, verify and unpack on the target, switch `current` atomically.

    Returns {name, version, current, previous, config_dir}. Raises KernelPackageError (nothing
    changed on the target) on any refusal."""
    artifact = verify(artifact_path, runtime)
    sup = Supervisor(executor, workdir, python)
    upload = f"{sup.workdir}/kernels/.incoming-{uuid.uuid4().hex[:8]}.tar.gz"
    executor.run(["mkdir", "-p", f"{sup.workdir}/kernels"], timeout=_TIMEOUT_S)
    executor.put(artifact.path, upload)
    return kernel_call(
        sup, "kernels_install", upload=upload, arch=runtime.arch, triton=runtime.triton
    )


def list_packages(executor: Executor, workdir: str, python: str) -> JSONObject:
    """{packages: {name: {versions, current, previous}}, env: {SGLANG_MOE_CONFIG_DIR}}."""
    return kernel_call(Supervisor(executor, workdir, python), "kernels_list")


def rollback(
    executor: Executor, workdir: str, python: str, name: str, to: str | None = None
) -> JSONObject:
    """Switch `current` back to the previous (or the named) installed version, re-verified."""
    return kernel_call(
        Supervisor(executor, workdir, python), "kernels_rollback", name=name, version=to
    )


def split_ref(ref: str) -> tuple[str, str]:
    name, sep, version = ref.partition("@")
    if not sep or not name or not version:
        raise KernelPackageError(f"kernel package {ref!r} must be written name@version")
    return name, version


@runtime_checkable
class _KnowsPython(Protocol):
    python: str  # the target's python (SSHExecutor)


def package_present(
    executor_or_supervisor: Executor | Supervisor, workdir: str, ref: str, python: str | None = None
) -> bool:
    """Deploy preflight: is `name@version` installed and intact under `<workdir>/kernels/`?

    Accepts an Executor or a Supervisor (its executor and python are used)."""
    name, version = split_ref(ref)
    given = executor_or_supervisor
    if isinstance(given, Supervisor) and given.workdir == workdir.rstrip("/"):
        sup = given
    elif isinstance(given, Supervisor):
        sup = Supervisor(given.executor, workdir, python or given.python or "python3")
    else:  # an SSHExecutor knows the target's python
        known = given.python if isinstance(given, _KnowsPython) else None
        sup = Supervisor(given, workdir, python or known or "python3")
    return bool(kernel_call(sup, "kernels_present", name=name, version=version)["present"])
