"""sm_120 ahead-of-time compile of every shipped config, with the Triton the box runs (3.8.0).

Runs the real compiler (ptxas bundled in the triton wheel, no GPU, no driver) in .venv-aot;
results are cached by content hash under .dsv4ops/aot-cache, so only changed kernels recompile.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dsv4ops.errors import KernelPackageError
from dsv4ops.kernels import aot
from dsv4ops.kernels.build import build
from dsv4ops.kernels.catalog import AOT_ONLY, FIXED_CONFIGS, kernels_dir, shipped_configs
from dsv4ops.remote.local import LocalExecutor
from testing.kernels import ShippedAot

pytestmark = pytest.mark.kernels

if not aot.aot_python().exists():
    pytest.skip(
        f"{aot.aot_python()} is missing: `make install` creates .venv-aot (triton 3.8.0)",
        allow_module_level=True,
    )

SPILLS = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 128,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 4,
}
TOO_MUCH_SMEM = {"BLOCK_H": 16, "BLOCK_T": 64, "num_warps": 8, "num_stages": 1}
# The paged decode attention at 4 warps: its [16, 512] accumulator and paged addressing spill.
PAGED_SPILLS = {"BLOCK_H": 16, "BLOCK_T": 16, "num_warps": 4, "num_stages": 2}
# NVFP4 / MXFP4 W4A16: dequantizing a 128 x 128 weight tile in registers spills at 4 warps.
NVFP4_SPILLS = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 128,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}
MXFP4_SPILLS = NVFP4_SPILLS
# sm_120's native FP4 MMA per dot_scaled format (reference §3.4)
FP4_MMA = {
    "fused_moe_nvfp4_w4a4": ("kind::mxf4nvf4.block_scale.scale_vec::4X", ".ue4m3"),
    "fused_moe_mxfp4_w4a4": ("kind::mxf4nvf4.block_scale.scale_vec::2X", ".ue8m0"),
}


def test_every_shipped_config_compiles_for_sm120_within_limits(shipped_aot: ShippedAot) -> None:
    # shipped_aot is the session's one compile of aot.jobs_for(shipped_configs()) from an empty
    # cache (tests/conftest.py); the builds that follow reuse its cache instead of compiling again.
    version, results = shipped_aot.version, shipped_aot.results
    assert len(results) == len(aot.jobs_for(shipped_configs()))
    assert version == "3.8.0"
    for r in results:
        assert r.ok, r.describe()
        assert r.detail["shared"] <= aot.SM120_MAX_SHARED
        assert len(r.detail["cubin_sha256"]) == 64
    kernels = {r.kernel for r in results}
    assert {
        "fused_moe_nvfp4_up",
        "fused_moe_nvfp4_down",
        "fused_moe_mxfp4_up",
        "fused_moe_mxfp4_down",
    } <= kernels
    assert kernels >= AOT_ONLY
    # the sparse decode attention the plugin puts in SGLang's place, at the one config it launches
    paged = [r for r in results if r.kernel == "flash_mla_paged"]
    assert [r.config for r in paged] == [FIXED_CONFIGS["flash_mla_paged"]], paged
    for r in results:
        if r.kernel in AOT_ONLY:  # tl.dot_scaled -> sm_120's native FP4 MMA, ue4m3 / ue8m0 scales
            kind, scale = FP4_MMA[r.kernel.rpartition("_")[0]]
            assert any(kind in m and m.endswith(scale) for m in r.detail["mma"]), (
                r.describe(),
                r.detail["mma"],
            )
        elif r.kernel.startswith("fused_moe"):  # W4A16 dequantizes to bf16: bf16 MMA, as bf16
            assert r.detail["mma"] == [
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
            ], r.detail["mma"]


@pytest.mark.slow
def test_configs_over_sm120_limits_are_rejected_with_the_reason() -> None:
    jobs = [
        ("sparse_decode_attn", TOO_MUCH_SMEM),
        ("fused_moe_up", SPILLS),
        ("fused_moe_nvfp4_up", NVFP4_SPILLS),
        ("fused_moe_mxfp4_down", MXFP4_SPILLS),
        ("flash_mla_paged", PAGED_SPILLS),
    ]
    with LocalExecutor() as ex:
        _, (smem, spill, fp4_spill, mx_spill, paged_spill) = aot.check(
            jobs, executor=ex, kernels_root=kernels_dir()
        )
    assert not paged_spill.ok and "registers spill" in paged_spill.describe()
    assert not smem.ok and "exceeds sm_120's 101376 B" in smem.describe()
    assert not spill.ok and "registers spill" in spill.describe()
    assert not fp4_spill.ok and "registers spill" in fp4_spill.describe()
    assert not mx_spill.ok and "registers spill" in mx_spill.describe()


def test_build_refuses_a_package_with_a_spilling_config(
    tmp_path: Path, warm_aot_cache: ShippedAot
) -> None:
    # The unchanged configs come from the session's compile; the spilling one compiles here.
    root = tmp_path / "kernels"
    shutil.copytree(kernels_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
    up = next(
        p for p in (root / "configs").glob("triton_3_8_0/E=*.json") if not p.stem.endswith("_down")
    )
    table = json.loads(up.read_text())
    table["64"] = SPILLS
    up.write_text(json.dumps(table))
    out = tmp_path / "dist"
    with LocalExecutor() as ex, pytest.raises(KernelPackageError) as err:
        build(executor=ex, out_dir=out, version="9.9.9", root=root, interpreter=False)
    assert "registers spill" in str(err.value) and f"{up.name} M=64" in str(err.value)
    assert not out.exists()


def test_limit_rules() -> None:
    base = {
        "ok": True,
        "shared": 1000,
        "static_shared": 0,
        "regs": 128,
        "stack": 0,
        "local": 0,
        "config": {"num_warps": 4},
    }
    assert aot.limit_problems(base) == []
    assert "exceeds" in aot.limit_problems({**base, "shared": 101_377})[0]
    assert "per block" in aot.limit_problems({**base, "regs": 255, "config": {"num_warps": 16}})[0]
    assert "spill" in aot.limit_problems({**base, "stack": 8})[0]
    assert "compile failed" in aot.limit_problems({"ok": False, "error": "K >= 16"})[0]
