"""Verify, deploy, list and roll back kernel packages on a target, through the Executor seam.

Everything that can be refused locally is refused before the target is touched: archive rules
and checksums (`pkgtool.read_safe`/`verify_members`, the same code the target runs), the manifest
schema and compatibility with what the target runs. The target then re-verifies what it received
(`pkgtool install`), unpacks to `<workdir>/kernels/<name>/<version>/`, swaps `current` atomically
and records `SGLANG_MOE_CONFIG_DIR` in `<workdir>/state/kernels.json` (Supervisor.read_state
("kernels")["env"]).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsv4ops.constants import BOX_ARCH, BOX_DEVICE_NAME, BOX_TRITON_VERSION
from dsv4ops.errors import KernelPackageError
from dsv4ops.kernels import pkgtool
from dsv4ops.kernels.manifest import Manifest, TargetRuntime, check_compatible, parse
from dsv4ops.remote.base import Executor

STATE_NAME = "kernels"  # <workdir>/state/kernels.json
_TOOL_SOURCE = Path(pkgtool.__file__).read_text(encoding="utf-8")
_TIMEOUT_S = 120


@dataclass(frozen=True)
class Artifact:
    path: Path
    manifest: Manifest
    files: dict[str, bytes]


def open_artifact(path: Path) -> Artifact:
    """Read and fully verify an artifact locally; raises KernelPackageError on any refusal."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise KernelPackageError(f"{path}: cannot read artifact: {exc.strerror}") from None
    try:
        top, files = pkgtool.read_safe(data)
        raw = pkgtool.verify_members(files)
    except pkgtool.PackageError as exc:
        raise KernelPackageError(f"{path}: {exc}") from None
    manifest = parse(raw, f"{path}:manifest.json")
    if top != f"{manifest.name}-{manifest.version}":
        raise KernelPackageError(f"{path}: top directory {top!r} is not {manifest.name}-{manifest.version}")
    return Artifact(Path(path), manifest, files)


def twin_runtime(twin_env: dict[str, str] | None = None) -> TargetRuntime:
    """A twin target stands in for the box: sm_120 and the box's triton unless its env says so."""
    triton = (twin_env or {}).get("DSV4_TWIN_TRITON_VERSION", BOX_TRITON_VERSION)
    return TargetRuntime(BOX_ARCH, triton, (BOX_DEVICE_NAME,), source="twin target, emulating the box")


_PROBE = (
    "import json, subprocess\n"
    "from importlib import metadata\n"
    "def v(p):\n"
    "    try: return metadata.version(p)\n"
    "    except Exception: return None\n"
    "try:\n"
    "    out = subprocess.run(['nvidia-smi', '--query-gpu=name,compute_cap', '--format=csv,noheader'],"
    " capture_output=True, text=True, timeout=30).stdout\n"
    "except Exception: out = ''\n"
    "gpus = [l.split(',') for l in out.strip().splitlines() if ',' in l]\n"
    "print(json.dumps({'triton': v('triton'), 'torch': v('torch'),"
    " 'gpus': [[n.strip(), c.strip()] for n, c in gpus]}))\n"
)


def probe_runtime(executor: Executor, python: str) -> TargetRuntime:
    """Ask the target's python for its triton and nvidia-smi for its GPUs; raises when unknown."""
    result = executor.run([python, "-c", _PROBE], timeout=_TIMEOUT_S)
    info = json.loads(result.stdout.strip().splitlines()[-1])
    if not info["triton"] or not info["gpus"]:
        raise KernelPackageError(f"{executor.host}: cannot tell which triton/GPU the target runs "
                                 f"(triton={info['triton']}, gpus={info['gpus']})")
    cc = info["gpus"][0][1].replace(".", "")
    names = tuple(sorted({n.replace(" ", "_") for n, _ in info["gpus"]}))
    return TargetRuntime(f"sm_{cc}", info["triton"], names, source=f"probed on {executor.host}")


def _tool(executor: Executor, python: str, *args: str) -> dict[str, Any]:
    result = executor.run([python, "-c", _TOOL_SOURCE, *args], timeout=_TIMEOUT_S, check=False)
    try:
        reply = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise KernelPackageError(f"{executor.host}: kernel package tool failed:\n{result.describe()}") from None
    if "error" in reply:
        raise KernelPackageError(f"{executor.host}: {reply['error']}")
    return reply


def verify(artifact_path: Path, runtime: TargetRuntime | None = None) -> Artifact:
    """Checksums and archive rules; with `runtime`, compatibility too. Raises KernelPackageError."""
    artifact = open_artifact(artifact_path)
    if runtime is not None:
        check_compatible(artifact.manifest, runtime)
    return artifact


def deploy(executor: Executor, workdir: str, python: str, artifact_path: Path,
           runtime: TargetRuntime) -> dict[str, Any]:
    """Verify locally, upload, verify and unpack on the target, switch `current` atomically.

    Returns {name, version, current, previous, config_dir}. Raises KernelPackageError (nothing
    changed on the target) on any refusal."""
    artifact = verify(artifact_path, runtime)
    upload = f"{workdir}/kernels/.incoming-{uuid.uuid4().hex[:8]}.tar.gz"
    executor.run(["mkdir", "-p", f"{workdir}/kernels"], timeout=_TIMEOUT_S)
    executor.put(artifact.path, upload)
    return _tool(executor, python, "install", "--workdir", workdir, "--upload", upload,
                 "--arch", runtime.arch, "--triton", runtime.triton)


def list_packages(executor: Executor, workdir: str, python: str) -> dict[str, Any]:
    """{packages: {name: {versions, current, previous}}, env: {SGLANG_MOE_CONFIG_DIR}}."""
    return _tool(executor, python, "list", "--workdir", workdir)


def rollback(executor: Executor, workdir: str, python: str, name: str,
             to: str | None = None) -> dict[str, Any]:
    """Switch `current` back to the previous (or the named) installed version, re-verified."""
    args = ["rollback", "--workdir", workdir, "--name", name]
    return _tool(executor, python, *args, *(["--version", to] if to else []))


def split_ref(ref: str) -> tuple[str, str]:
    name, sep, version = ref.partition("@")
    if not sep or not name or not version:
        raise KernelPackageError(f"kernel package {ref!r} must be written name@version")
    return name, version


def package_present(executor_or_supervisor: Any, workdir: str, ref: str, python: str | None = None) -> bool:
    """Deploy preflight: is `name@version` installed and intact under `<workdir>/kernels/`?

    Accepts an Executor or a Supervisor (its executor and python are used)."""
    executor = getattr(executor_or_supervisor, "executor", executor_or_supervisor)
    python = python or getattr(executor_or_supervisor, "python", None) or "python3"
    name, version = split_ref(ref)
    return bool(_tool(executor, python, "present", "--workdir", workdir, "--name", name,
                      "--version", version)["present"])
