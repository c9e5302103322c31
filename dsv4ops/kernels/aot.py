"""sm_120 ahead-of-time compile check of every shipped config, with sm_120's resource limits.

The interpreter runs configs that would fail at launch on the RTX PRO 6000 (reference §3.4), so
every distinct (kernel, config) is compiled for sm_120 with the Triton the box runs, in its own
venv (`.venv-aot`, no torch) through an Executor. Results are cached by content hash (kernel
sources, worker, config, triton version) under the state directory's `aot-cache/`, so only a
changed kernel or config recompiles.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dsv4ops.constants import state_dir
from dsv4ops.errors import KernelPackageError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels.catalog import ConfigFile, fixed_jobs
from dsv4ops.remote.base import Executor

WORKER = Path(__file__).with_name("aot_worker.py")
# CC 12.0: 99 KiB opt-in shared memory per block (NVIDIA Blackwell tuning guide; measured 101376
# on an RTX 5090), 255 registers per thread, 64K registers per block.
SM120_MAX_SHARED = 101_376
SM120_MAX_REGS_PER_THREAD = 255
SM120_MAX_REGS_PER_BLOCK = 65_536
_COMPILE_TIMEOUT_S = 600


@dataclass(frozen=True)
class AotResult:
    kernel: str
    config: dict[str, int]
    ok: bool
    problems: tuple[str, ...]
    detail: JSONObject

    def describe(self) -> str:
        cfg = ",".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.kernel}[{cfg}]: {'; '.join(self.problems) or 'fits sm_120'}"


AOT_PYTHON_ENV = "DSV4OPS_AOT_PYTHON"
AOT_PYTHON_RECORD = "dsv4ops-aot-python"  # in the running venv: one line, written by `make install`


def aot_python() -> Path:
    """Python of the sm_120 compile venv: $DSV4OPS_AOT_PYTHON, else the one `make install`
    recorded in the running venv (`<venv>/dsv4ops-aot-python`, one absolute path).

    Declared, not guessed from where the checkout or the venv happens to be: an install that
    recorded none (a plain `pip install`) names it with $DSV4OPS_AOT_PYTHON; `check` says so.
    """
    env = os.environ.get(AOT_PYTHON_ENV)
    if env:
        return Path(env)
    record = Path(sys.prefix) / AOT_PYTHON_RECORD
    try:
        return Path(record.read_text().strip())
    except OSError:
        return record  # missing: `check` reports it with the hint below


def cache_dir() -> Path:
    """Compile results under the operator's state directory, never inside the package."""
    return state_dir() / "aot-cache"


def limit_problems(r: JSONObject) -> list[str]:
    """Why a compiled config would fail or spill on sm_120 (empty when it fits)."""
    if not r.get("ok"):
        return [f"compile failed: {r.get('error')}"]
    problems = []
    shared = r["shared"] + r.get("static_shared", 0)
    if shared > SM120_MAX_SHARED:
        problems.append(f"shared memory {shared} B exceeds sm_120's {SM120_MAX_SHARED} B per block")
    threads = r["config"]["num_warps"] * 32
    if r["regs"] * threads > SM120_MAX_REGS_PER_BLOCK:
        problems.append(
            f"{r['regs']} registers x {threads} threads exceed {SM120_MAX_REGS_PER_BLOCK} per block"
        )
    if r["stack"] > 0 or r.get("local", 0) > 0:
        problems.append(
            f"registers spill ({r['regs']} regs, {r['stack']} B stack): over the "
            f"{SM120_MAX_REGS_PER_THREAD}-register budget"
        )
    return problems


def jobs_for(files: list[ConfigFile]) -> list[tuple[str, dict[str, int]]]:
    """Distinct (kernel, config) pairs across all files and the fixed-config kernels
    (catalog.FIXED_CONFIGS), in a stable order."""
    seen: dict[str, tuple[str, dict[str, int]]] = {}
    pairs = [(f.kernel, cfg) for f in files for cfg in f.table.values()] + fixed_jobs()
    for kernel, cfg in pairs:
        seen.setdefault(json.dumps([kernel, cfg], sort_keys=True), (kernel, cfg))
    return [seen[k] for k in sorted(seen)]


def _source_digest(kernels_root: Path) -> str:
    h = hashlib.sha256(WORKER.read_bytes() + b"no-line-info")
    for path in sorted(kernels_root.glob("*.py")):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def _run_json(executor: Executor, argv: list[str]) -> JSONObject:
    # Triton's own cache goes next to ours, never to ~/.triton.
    # TRITON_INTERPRET=0: the interpreter checks may have set it in this process's environment,
    # and under it @triton.jit yields interpreted functions that cannot be compiled.
    # TRITON_DISABLE_LINE_INFO=1: line info embeds the sources' absolute path in the cubin, and
    # Triton's own cache key ignores that path, so the recorded cubin_sha256 would depend on where
    # dsv4ops was installed when a kernel was first compiled. Without it the build reproduces
    # anywhere; the box JIT-compiles its own cubins (with line info) at run time.
    env = {
        "TRITON_CACHE_DIR": str(cache_dir().parent / "triton-cache"),
        "TRITON_INTERPRET": "0",
        "TRITON_DISABLE_LINE_INFO": "1",
    }
    result = executor.run(argv, timeout=_COMPILE_TIMEOUT_S, check=False, env=env)
    if not result.ok:
        raise KernelPackageError(f"sm_120 compile check could not run:\n{result.describe()}")
    report: JSONObject = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def check(
    jobs: list[tuple[str, dict[str, int]]],
    *,
    executor: Executor,
    kernels_root: Path,
    python: Path | None = None,
    use_cache: bool = True,
) -> tuple[str, list[AotResult]]:
    """Compile each job for sm_120; return (triton version used, results in job order).

    Raises KernelPackageError when the AOT venv is missing or the worker cannot run.
    """
    python = python or aot_python()
    if not python.exists():
        raise KernelPackageError(
            f"{python}: the sm_120 compile venv is missing",
            hint=f"`make install` creates .venv-aot with the box's triton "
            f"(triton 3.8.0) and records it; or set {AOT_PYTHON_ENV}",
        )
    version = _run_json(executor, [str(python), str(WORKER), "--version"])["triton"]
    salt = _source_digest(kernels_root) + version
    keys = [
        hashlib.sha256((salt + json.dumps(j, sort_keys=True)).encode()).hexdigest() for j in jobs
    ]
    cache = cache_dir()
    raw: dict[str, JSONObject] = {}
    if use_cache:
        for key in keys:
            path = cache / f"{key}.json"
            if path.is_file():
                raw[key] = json.loads(path.read_text())
    todo = [
        {"id": k, "kernel": j[0], "config": j[1]}
        for k, j in zip(keys, jobs, strict=True)
        if k not in raw
    ]
    if todo:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(todo, f)
        try:
            out = _run_json(executor, [str(python), str(WORKER), str(kernels_root), f.name])
        finally:
            os.unlink(f.name)
        cache.mkdir(parents=True, exist_ok=True)
        for r in out["results"]:
            raw[r["id"]] = r
            if not r["ok"]:  # a failure may be environmental: compile again next time
                continue
            tmp = cache / f".{r['id']}.tmp"
            tmp.write_text(json.dumps(r))
            os.replace(tmp, cache / f"{r['id']}.json")
    results = []
    for key, (kernel, cfg) in zip(keys, jobs, strict=True):
        problems = tuple(limit_problems(raw[key]))
        results.append(AotResult(kernel, cfg, not problems, problems, raw[key]))
    return version, results
