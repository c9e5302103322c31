"""`kernels build`: check every shipped config, then write a versioned, content-hashed artifact.

Checks first (a package is only written when all pass): config schema, sm_120 AOT compile of
every distinct config within sm_120's limits (with the box's triton, `.venv-aot`), and the
interpreter correctness run against the torch references (with the `kernels` extra's
torch/triton). The artifact is a deterministic `.tar.gz` (sorted entries, zero mtimes/owners):
`<name>-<version>/` holding manifest.json, configs/triton_X_Y_Z/ (SGLang's MoE layout, under the
block-FP8 names its triton_fp8_dequant path looks up), attention_configs/, moe_fp4_configs/
(NVFP4- and MXFP4-expert MoE, the package's own keys), kernels/*.py and site/ (the SGLang plugin
distribution, kernels/plugin_dist.py).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dsv4ops import __version__
from dsv4ops.constants import (
    BOX_ARCH,
    BOX_DEVICE_NAME,
    BOX_TORCH_VERSION,
    BOX_TRITON_VERSION,
    SGLANG_VERSION,
)
from dsv4ops.errors import KernelPackageError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels import aot
from dsv4ops.kernels.catalog import (
    AOT_ONLY_WHY,
    CHECKED_ELSEWHERE,
    ConfigFile,
    interpreter_jobs,
    kernels_dir,
    shipped_configs,
)
from dsv4ops.kernels.manifest import PACKAGE_ROOT, SCHEMA, Manifest, parse
from dsv4ops.kernels.plugin_dist import (
    SITE,
    package_env,
    plugin_members,
    plugin_section,
    replaces,
    sglang_section,
)
from dsv4ops.remote.base import Executor
from dsv4ops.waits import QUIET, WaitObserver

DEFAULT_NAME = "dsv4-decode-kernels"


@dataclass(frozen=True)
class BuildResult:
    path: Path
    sha256: str
    manifest: Manifest


def _role(rel: str) -> str:
    if rel.startswith("configs/"):
        return "moe_config"
    if rel.startswith("attention_configs/"):
        return "attention_config"
    if rel.startswith("moe_fp4_configs/"):
        return "moe_fp4_config"
    if rel.startswith(f"{SITE}/"):
        return "sglang_plugin"
    return "kernel_source"


def _payload(root: Path, files: list[ConfigFile]) -> dict[str, bytes]:
    payload = {f.lands_at: f.path.read_bytes() for f in files}
    for src in sorted(root.glob("*.py")):
        payload[f"kernels/{src.name}"] = src.read_bytes()
    return payload


def _interpreter_check(
    executor: Executor, jobs: list[list[str | dict[str, int]]], python: str, root: Path
) -> JSONObject:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(jobs, f)
    try:
        result = executor.run(
            [python, "-m", "dsv4ops.kernels.interp_check", f.name],
            timeout=600,
            check=False,
            cwd=str(root.parent),
        )
    finally:
        os.unlink(f.name)
    if not result.ok:
        raise KernelPackageError(
            f"interpreter correctness check could not run:\n{result.describe()}",
            hint="it needs the kernels extra: pip install -e '.[kernels]'",
        )
    report: JSONObject = json.loads(result.stdout.strip().splitlines()[-1])
    bad = [c for c in report["cases"] if not c["ok"]]
    if bad:
        raise KernelPackageError(
            f"interpreter check failed for {bad[0]['kernel']} {bad[0]['config']}: {bad[0]}"
        )
    return report


def run_checks(
    executor: Executor,
    files: list[ConfigFile],
    root: Path,
    *,
    interpreter: bool,
    python: str,
    aot_python: Path | None,
    waits: WaitObserver = QUIET,
) -> JSONObject:
    """Run the AOT and interpreter checks; raise KernelPackageError on any failure. Each runs
    minutes on a laptop: `waits` shows them while they run (dsv4ops/waits.py)."""
    jobs = aot.jobs_for(files)
    with waits.waiting(f"sm_120 compile check of {len(jobs)} kernel configs", None) as seen:
        seen.observe(f"{len(files)} config files, Triton {BOX_TRITON_VERSION} ahead-of-time")
        triton_aot, results = aot.check(
            jobs, executor=executor, kernels_root=root, python=aot_python
        )
    bad = [r for r in results if not r.ok]
    if bad:
        users = [
            f"{f.path.name} M={m}"
            for f in files
            for m, c in f.table.items()
            if f.kernel == bad[0].kernel and c == bad[0].config
        ] or [f"kernels/{bad[0].kernel}.py CONFIG"]  # a fixed-config kernel (catalog.FIXED_CONFIGS)
        raise KernelPackageError(
            f"config rejected for sm_120: {bad[0].describe()} (used by {', '.join(users[:3])})"
        )
    checks: JSONObject = {
        "sm120_compile": {
            "triton": triton_aot,
            "target": "cuda:120 (sm_120a), warp 32",
            "limits": {
                "shared_per_block": aot.SM120_MAX_SHARED,
                "regs_per_thread": aot.SM120_MAX_REGS_PER_THREAD,
            },
            "results": [
                {
                    "kernel": r.kernel,
                    "config": r.config,
                    "shared": r.detail["shared"],
                    "regs": r.detail["regs"],
                    "mma": r.detail.get("mma", []),
                    "cubin_sha256": r.detail["cubin_sha256"],
                }
                for r in results
            ],
        }
    }
    if interpreter:
        with waits.waiting("interpreter correctness run (CPU) against the torch references", None):
            checks["interpreter"] = _interpreter_check(
                executor, [list(j) for j in interpreter_jobs(jobs)], python, root
            )
    else:
        checks["interpreter"] = {"ran": False, "reason": "skipped with --no-interpreter-check"}
    elsewhere = sorted({k for k, _ in jobs if k in CHECKED_ELSEWHERE})
    if elsewhere:
        checks["interpreter"]["checked_elsewhere"] = {k: CHECKED_ELSEWHERE[k] for k in elsewhere}
    unchecked = sorted({k for k, _ in jobs if k in AOT_ONLY_WHY})
    if unchecked:
        reasons = sorted({AOT_ONLY_WHY[k] for k in unchecked})
        checks["interpreter"]["not_checked"] = {
            "kernels": unchecked,
            "reason": f"{'; '.join(reasons)}: sm_120 AOT compile only; needs a GPU correctness run",
            "why": {k: AOT_ONLY_WHY[k] for k in unchecked},
        }
    return checks


def manifest_for(
    name: str,
    version: str,
    payload: dict[str, bytes],
    files: list[ConfigFile],
    checks: JSONObject,
) -> JSONObject:
    return {
        "schema": SCHEMA,
        "name": name,
        "version": version,
        "built_by": f"dsv4ops {__version__}",
        "target": {
            "arch": BOX_ARCH,
            "device_names": [BOX_DEVICE_NAME],
            "max_shared_per_block": aot.SM120_MAX_SHARED,
        },
        "toolchain": {
            "triton": BOX_TRITON_VERSION,
            "torch": BOX_TORCH_VERSION,
            "sglang": SGLANG_VERSION,
        },
        "checks": checks,
        "model": {
            "id": "DeepSeek-V4-Flash",
            "experts": 256,
            "top_k": 6,
            "hidden": 4096,
            "moe_intermediate": 2048,
            "tp": 4,
            "heads_per_rank": 16,
            "head_dim": 512,
            "swa_rows": 128,
            "index_topk": 512,
            "kv_cache": "fp8_e4m3 nope + bf16 rope, ue8m0 scales",
            "moe_weights": {
                "bf16": "configs/: launch params under the names SGLang's block-FP8 Triton MoE looks up (the package's bf16 kernel shares the tiles)",
                "nvfp4": "moe_fp4_configs/: e2m1 packed 2 per uint8 (low nibble = even k), one "
                "float8_e4m3fn scale per 16 along K, one fp32 global scale per expert; "
                "w4a16 (checked) and w4a4 tl.dot_scaled (AOT only)",
                "mxfp4": "moe_fp4_configs/ (dtype=mxfp4_*): e2m1 packed 2 per uint8 (low nibble = "
                "even k), one ue8m0 scale byte per 32 along K (2^(byte-127)), no global "
                "scale; w4a16 (checked) and w4a4 tl.dot_scaled (AOT only)",
            },
        },
        "config_keys": sorted(f.config_key for f in files),
        "env": package_env(name, PACKAGE_ROOT),
        "plugin": plugin_section(name),
        "sglang": sglang_section(),
        "tuning": {
            "measured": False,
            "note": "launch params chosen to fit sm_120 (AOT-checked); "
            "not yet timed on a GPU: run benchmarks/kernels_gpu.py --tune on the box",
        },
        "files": [
            {
                "path": p,
                "sha256": hashlib.sha256(b).hexdigest(),
                "size": len(b),
                "role": _role(p),
                "lands_at": f"{PACKAGE_ROOT}/{p}",
                **replaces(p),
            }
            for p, b in sorted(payload.items())
        ],
    }


def write_archive(out: Path, top: str, members: dict[str, bytes]) -> str:
    """Deterministic .tar.gz of members under `top/`; returns its sha256."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for rel, data in sorted(members.items()):
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, out)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def build(
    *,
    executor: Executor,
    out_dir: Path,
    version: str | None = None,
    name: str = DEFAULT_NAME,
    root: Path | None = None,
    interpreter: bool = True,
    python: str = sys.executable,
    aot_python: Path | None = None,
    waits: WaitObserver = QUIET,
) -> BuildResult:
    """Check and package the shipped kernels; raises KernelPackageError when a check fails."""
    root = root or kernels_dir()
    files = shipped_configs(root)
    payload = _payload(root, files)
    digest = hashlib.sha256(
        b"".join(k.encode() + hashlib.sha256(v).digest() for k, v in sorted(payload.items()))
    )
    version = (
        version or f"{__version__}+t{BOX_TRITON_VERSION.replace('.', '')}.{digest.hexdigest()[:8]}"
    )
    if "/" in version or version.startswith(".") or not version.strip():
        raise KernelPackageError(f"bad version {version!r}: no '/', no leading '.'")
    checks = run_checks(
        executor,
        files,
        root,
        interpreter=interpreter,
        python=python,
        aot_python=aot_python,
        waits=waits,
    )
    payload.update(plugin_members(name, version))  # after the version: its dist-info names it
    manifest = manifest_for(name, version, payload, files, checks)
    members = {**payload, "manifest.json": (json.dumps(manifest, indent=1) + "\n").encode()}
    path = out_dir / f"{name}-{version}.tar.gz"
    sha = write_archive(path, f"{name}-{version}", members)
    return BuildResult(path, sha, parse(manifest, str(path)))
