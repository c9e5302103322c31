"""Compile kernels ahead of time for sm_120 on a machine without a GPU (triton only, no torch).

Run by `dsv4ops.kernels.aot` with the Triton the box runs (.venv-aot, triton 3.8.0):

    python aot_worker.py KERNELS_ROOT JOBS_JSON        -> {"triton": ver, "results": [...]}
    python aot_worker.py --version                     -> {"triton": ver}

Each job {"id", "kernel", "config"} is compiled with `triton.compile(ASTSource(...),
target=GPUTarget("cuda", 120, 32))` (the wheel bundles ptxas, so no driver is needed); the result
holds dynamic shared memory from the compile metadata, registers/stack from the bundled
`cuobjdump -res-usage`, and the tensor-core instructions in the PTX (`mma`: bf16 MMA for the
dequantizing kernels, the native FP4 `kind::mxf4nvf4...ue4m3` MMA for NVFP4 tl.dot_scaled and
`...scale_vec::2X...ue8m0` for MXFP4's). Jobs run in parallel processes (compiles are CPU-bound,
seconds each).
Like the target agent, this is its own program (another venv), so it runs cuobjdump itself
rather than through the Executor seam that launched it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import triton

# A job and its result are JSON; this program runs in the AOT venv without dsv4ops, so it
# cannot import dsv4ops.jsontypes and names untyped JSON itself.
_JSONObject = dict[str, Any]

ARCH, WARP = 120, 32
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_MMA = re.compile(r"\bmma\.[\w.:]+")


_SOURCES = "dsv4_kernel_sources"


def _load_sources(root: str) -> None:
    """Import the kernel source folder as a package of its own name (its modules import each
    other relatively), so this worker needs neither dsv4ops nor its dependencies in its venv."""
    if _SOURCES in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        _SOURCES, os.path.join(root, "__init__.py"), submodule_search_locations=[root]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_SOURCES] = module
    spec.loader.exec_module(module)


# A kernel (a triton JITFunction: untyped, triton has no py.typed), its (signature, constexprs)
# builder and the builder's extra arguments.
_Kernel = tuple[
    "triton.JITFunction", Callable[..., tuple[dict[str, str], dict[str, int]]], dict[str, bool]
]


def _kernel(name: str) -> _Kernel:
    moe_grouped_gemm, moe_mxfp4, moe_nvfp4, sparse_decode_attn, flash_mla_paged = (
        importlib.import_module(f"{_SOURCES}.{m}")
        for m in (
            "moe_grouped_gemm",
            "moe_mxfp4",
            "moe_nvfp4",
            "sparse_decode_attn",
            "flash_mla_paged",
        )
    )

    if name == "sparse_decode_attn":
        return sparse_decode_attn.sparse_decode_attn_kernel, sparse_decode_attn.aot_signature, {}
    if name == "flash_mla_paged":
        return flash_mla_paged.flash_mla_paged_kernel, flash_mla_paged.aot_signature, {}
    family, _, proj = name.rpartition("_")
    if proj in ("up", "down"):
        down = {"down": proj == "down"}
        if family == "fused_moe":
            return moe_grouped_gemm.fused_moe_kernel, moe_grouped_gemm.aot_signature, down
        if family == "fused_moe_nvfp4":
            return moe_nvfp4.fused_moe_nvfp4_kernel, moe_nvfp4.aot_signature, down
        if family == "fused_moe_nvfp4_w4a4":
            return (
                moe_nvfp4.fused_moe_nvfp4_dot_scaled_kernel,
                moe_nvfp4.aot_signature_dot_scaled,
                down,
            )
        if family == "fused_moe_mxfp4":
            return moe_mxfp4.fused_moe_mxfp4_kernel, moe_mxfp4.aot_signature, down
        if family == "fused_moe_mxfp4_w4a4":
            return (
                moe_mxfp4.fused_moe_mxfp4_dot_scaled_kernel,
                moe_mxfp4.aot_signature_dot_scaled,
                down,
            )
    raise ValueError(f"unknown kernel {name!r}")


def _mma_kinds(ptx: str) -> list[str]:
    """The distinct tensor-core instructions in the PTX, e.g. `mma.sync.aligned.m16n8k16.row.col.
    f32.bf16.bf16.f32` or the native FP4 `...kind::mxf4nvf4.block_scale.scale_vec::4X...ue4m3`
    (NVFP4) / `...scale_vec::2X...ue8m0` (MXFP4)."""
    return sorted({m.group(0) for m in _MMA.finditer(ptx)})


def _resource_usage(cubin: bytes) -> dict[str, int]:
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run(
            [tool, "-res-usage", f.name], capture_output=True, text=True, timeout=120, check=True
        ).stdout
    match = _RES.search(out)
    if not match:
        raise RuntimeError(f"cuobjdump printed no resource usage: {out[-300:]!r}")
    reg, stack, static_shared, local = (int(g) for g in match.groups())
    return {"regs": reg, "stack": stack, "static_shared": static_shared, "local": local}


def compile_one(job: _JSONObject) -> _JSONObject:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    t0 = time.monotonic()
    out = {"id": job["id"], "kernel": job["kernel"], "config": job["config"]}
    try:
        fn, signature_of, extra = _kernel(job["kernel"])
        signature, constexprs = signature_of(job["config"], **extra)
        compiled = triton.compile(
            ASTSource(fn, signature, constexprs),
            target=GPUTarget("cuda", ARCH, WARP),
            options={
                "num_warps": job["config"]["num_warps"],
                "num_stages": job["config"]["num_stages"],
            },
        )
        cubin = compiled.asm["cubin"]
        out.update(
            ok=True,
            shared=int(compiled.metadata.shared),
            cubin_bytes=len(cubin),
            cubin_sha256=hashlib.sha256(cubin).hexdigest(),
            mma=_mma_kinds(compiled.asm["ptx"]),
            **_resource_usage(cubin),
        )
    except Exception as exc:  # noqa: BLE001 - a failed compile is a result, reported per job
        out.update(
            ok=False, error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:400]}"
        )
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def main(argv: list[str]) -> int:
    import triton

    if argv and argv[0] == "--version":
        sys.stdout.write(json.dumps({"triton": triton.__version__}) + "\n")
        return 0
    kernels_root, jobs_path = argv
    _load_sources(kernels_root)
    with open(jobs_path) as f:
        jobs = json.load(f)
    workers = max(1, min(len(jobs), os.cpu_count() or 1))
    if workers == 1:
        results = [compile_one(j) for j in jobs]
    else:
        with ProcessPoolExecutor(
            workers, initializer=_load_sources, initargs=(kernels_root,)
        ) as pool:
            results = list(pool.map(compile_one, jobs))
    sys.stdout.write(json.dumps({"triton": triton.__version__, "results": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
