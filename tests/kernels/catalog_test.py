"""The shipped configs: schema, SGLang's nearest-bucket lookup, coverage of the profiles' buckets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.constants import BOX_DEVICE_NAME
from dsv4ops.errors import KernelPackageError
from dsv4ops.kernels.aot import jobs_for
from dsv4ops.kernels.catalog import (
    AOT_ONLY,
    CHECKED_ELSEWHERE,
    FIXED_CONFIGS,
    FP4_DTYPES,
    interpreter_jobs,
    kernel_of,
    load_table,
    missing_buckets,
    nearest,
    shipped_configs,
)
from dsv4ops.profiles import list_profiles, load_profile

REPO = Path(__file__).resolve().parents[2]


def test_moe_configs_use_sglangs_file_names_for_the_box() -> None:
    files = {f.lands_at for f in shipped_configs()}
    # The names SGLang's triton_fp8_dequant path computes (dsv4ops/sglang_paths.py), nothing else.
    base = f"configs/triton_3_8_0/E=256,N=512,device_name={BOX_DEVICE_NAME},dtype=fp8_w8a8,block_shape=[128, 128]"
    assert f"{base}.json" in files  # w13 (gate/up): N = 2048 / TP4
    assert f"{base}_down.json" in files  # w2
    assert {f for f in files if f.startswith("configs/")} == {f"{base}.json", f"{base}_down.json"}


def test_fp4_moe_configs_use_the_packages_own_keys_outside_sglangs_dir() -> None:
    """SGLang's Triton fused-MoE has no FP4 dtype= name, so the NVFP4 and MXFP4 files carry a
    kernel= key and stay out of configs/ (what SGLANG_MOE_CONFIG_DIR points SGLang at)."""
    by_kernel = {f.kernel: f.lands_at for f in shipped_configs()}
    base = (
        f"moe_fp4_configs/triton_3_8_0/kernel=fused_moe,E=256,N=512,device_name={BOX_DEVICE_NAME}"
    )
    assert by_kernel["fused_moe_nvfp4_up"] == f"{base},dtype=nvfp4_w4a16.json"
    assert by_kernel["fused_moe_nvfp4_down"] == f"{base},dtype=nvfp4_w4a16_down.json"
    assert by_kernel["fused_moe_nvfp4_w4a4_up"] == f"{base},dtype=nvfp4_w4a4.json"
    assert by_kernel["fused_moe_mxfp4_up"] == f"{base},dtype=mxfp4_w4a16.json"
    assert by_kernel["fused_moe_mxfp4_down"] == f"{base},dtype=mxfp4_w4a16_down.json"
    assert by_kernel["fused_moe_mxfp4_w4a4_up"] == f"{base},dtype=mxfp4_w4a4.json"
    assert by_kernel["fused_moe_mxfp4_w4a4_down"] == f"{base},dtype=mxfp4_w4a4_down.json"
    assert set(AOT_ONLY) == {
        "fused_moe_nvfp4_w4a4_up",
        "fused_moe_nvfp4_w4a4_down",
        "fused_moe_mxfp4_w4a4_up",
        "fused_moe_mxfp4_w4a4_down",
    }
    assert set(FP4_DTYPES) == {"nvfp4_w4a16", "nvfp4_w4a4", "mxfp4_w4a16", "mxfp4_w4a4"}
    with pytest.raises(KernelPackageError, match="dtype='mxfp4'"):
        kernel_of("kernel=fused_moe,E=256,N=512,device_name=X,dtype=mxfp4.json")


def test_every_bucket_of_every_shipped_profile_has_its_own_config() -> None:
    profiles = list_profiles(REPO / "profiles")
    assert profiles, "no shipped profiles found"
    buckets = set()
    for path in profiles:
        buckets |= set(load_profile(path).decode_buckets)
    assert {1, 8, 60, 96} <= buckets  # step-8 baseline and the step-4 profile (60) are both in
    for f in shipped_configs():
        assert missing_buckets(f.table, sorted(buckets)) == [], f.path.name


def test_down_config_block_m_matches_up_as_sglang_forces() -> None:
    tables = {f.kernel: f.table for f in shipped_configs()}
    for family in (
        "fused_moe",
        "fused_moe_nvfp4",
        "fused_moe_nvfp4_w4a4",
        "fused_moe_mxfp4",
        "fused_moe_mxfp4_w4a4",
    ):
        for m, cfg in tables[f"{family}_up"].items():
            assert tables[f"{family}_down"][m]["BLOCK_SIZE_M"] == cfg["BLOCK_SIZE_M"], (family, m)


def test_nearest_picks_the_closest_bucket_like_sglang() -> None:
    table = {1: {"v": 1}, 8: {"v": 8}, 64: {"v": 64}}
    assert nearest(table, 3) == {"v": 1}
    assert nearest(table, 24) == {"v": 8}
    assert nearest(table, 200) == {"v": 64}
    assert missing_buckets(table, [1, 2, 8]) == [2]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"x": {}}', "key 'x': batch sizes must be positive integers"),
        ('{"1": {"BLOCK_H": 16}}', "key '1': expected exactly BLOCK_H, BLOCK_T"),
        (
            '{"1": {"BLOCK_H": 0, "BLOCK_T": 16, "num_warps": 4, "num_stages": 2}}',
            "key '1'.BLOCK_H",
        ),
        ("{", "not readable JSON"),
    ],
)
def test_bad_config_file_names_file_and_key(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "kernel=sparse_decode_attn,H=16.json"
    path.write_text(content)
    with pytest.raises(KernelPackageError) as err:
        load_table(path, "sparse_decode_attn")
    assert str(path) in str(err.value) and message in str(err.value)


def test_shipped_files_are_valid_json_objects() -> None:
    for f in shipped_configs():
        assert json.loads(f.path.read_text())


def test_fixed_config_kernels_compile_the_config_they_launch() -> None:
    """The AOT check compiles catalog.FIXED_CONFIGS; the launcher runs its module's CONFIG. Held
    equal, so what sm_120 was checked with is what the plugin launches."""
    pytest.importorskip("triton")
    from dsv4ops.kernels.sources import flash_mla_paged

    assert FIXED_CONFIGS == {"flash_mla_paged": flash_mla_paged.CONFIG}
    assert ("flash_mla_paged", flash_mla_paged.CONFIG) in jobs_for(shipped_configs())
    # its correctness is held to SGLang's reference by its own test, not the build's interpreter run
    assert "flash_mla_paged" in CHECKED_ELSEWHERE
    assert all(k != "flash_mla_paged" for k, _ in interpreter_jobs(jobs_for(shipped_configs())))
