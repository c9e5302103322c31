"""`kernels build`: the manifest says what the package holds, targets and was checked with."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from dsv4ops.constants import BOX_DEVICE_NAME
from dsv4ops.kernels.build import build
from dsv4ops.remote.local import LocalExecutor
from testing.kernels import Built, ShippedAot, read_members

pytestmark = pytest.mark.kernels


def test_manifest_lists_every_file_with_its_checksum_and_landing_place(built: Built) -> None:
    top, files = read_members(built.v1.path)
    assert top == "dsv4-decode-kernels-0.1.0"
    manifest = json.loads(files["manifest.json"])
    listed = {e["path"]: e for e in manifest["files"]}
    assert set(listed) == set(files) - {"manifest.json"}
    for path, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256(files[path]).hexdigest()
        assert entry["lands_at"] == f"<package root>/{path}"
    key = f"E=256,N=512,device_name={BOX_DEVICE_NAME},dtype=fp8_w8a8,block_shape=[128, 128]"
    moe = f"configs/triton_3_8_0/{key}.json"
    assert listed[moe]["role"] == "moe_config" and "get_default_config" in listed[moe]["replaces"]
    assert "triton_fp8_dequant path only" in listed[moe]["read_by"]
    assert manifest["env"] == {
        "SGLANG_MOE_CONFIG_DIR": "<package root>",
        "SGLANG_PLUGINS": "dsv4_decode_kernels",
        "PYTHONPATH": "<package root>/site",
    }
    assert f"{key}_down" in manifest["config_keys"]
    # The SGLang plugin distribution: entry point in group sglang.srt.plugins.
    eps = files["site/dsv4_decode_kernels-0.1.0.dist-info/entry_points.txt"].decode()
    assert eps == "[sglang.srt.plugins]\ndsv4_decode_kernels = dsv4ops_kernel_plugin:register\n"
    assert listed["site/dsv4ops_kernel_plugin/__init__.py"]["role"] == "sglang_plugin"
    assert manifest["plugin"]["hooks"] == ["moe_config_witness", "sparse_decode_attn"]
    assert set(manifest["plugin"]["not_registered"]) == {
        "fused_moe_mxfp4",
        "fused_moe_bf16",
    }
    assert manifest["sglang"]["requires_env"] == {
        "SGLANG_DSV4_FP4_DEQUANT": "1",
        "SGLANG_ENABLE_JIT_DEEPGEMM": "0",
    }
    for path in ("attention_configs/", "moe_fp4_configs/", "kernels/"):
        assert all(
            e["replaces"].startswith("nothing in SGLang")
            for p, e in listed.items()
            if p.startswith(path) and p != "kernels/flash_mla_paged.py"
        )
    attn = listed["kernels/flash_mla_paged.py"]
    assert attn["replaces"].startswith(
        "sglang.kernels.ops.attention.flash_mla_sm120.flash_mla_with_kvcache_sm120"
    )
    fp4 = f"kernel=fused_moe,E=256,N=512,device_name={BOX_DEVICE_NAME},dtype=nvfp4_w4a16"
    assert {fp4, f"{fp4}_down"} <= set(manifest["config_keys"])
    assert listed[f"moe_fp4_configs/triton_3_8_0/{fp4}.json"]["role"] == "moe_fp4_config"
    mx = f"kernel=fused_moe,E=256,N=512,device_name={BOX_DEVICE_NAME},dtype=mxfp4_w4a16"
    assert {mx, f"{mx}_down"} <= set(manifest["config_keys"])
    assert listed[f"moe_fp4_configs/triton_3_8_0/{mx}_down.json"]["role"] == "moe_fp4_config"
    for src in ("moe_nvfp4.py", "moe_mxfp4.py", "fp4_common.py"):
        assert listed[f"kernels/{src}"]["role"] == "kernel_source"
    assert "ue8m0" in manifest["model"]["moe_weights"]["mxfp4"]


def test_manifest_records_target_and_which_versions_checked_what(built: Built) -> None:
    m = built.v1.manifest.raw
    assert m["target"]["arch"] == "sm_120" and m["target"]["device_names"] == [BOX_DEVICE_NAME]
    assert m["toolchain"] == {"triton": "3.8.0", "torch": "2.14.1", "sglang": "0.5.23"}
    assert m["checks"]["sm120_compile"]["triton"] == "3.8.0"
    interp = m["checks"]["interpreter"]
    assert interp["torch"].startswith("2.13.0") and interp["triton"] == "3.7.1" and interp["passed"]
    kernels = {c["kernel"] for c in interp["cases"]}
    assert kernels == {
        "sparse_decode_attn",
        "fused_moe_up",
        "fused_moe_down",
        "fused_moe_nvfp4_up",
        "fused_moe_nvfp4_down",
        "fused_moe_mxfp4_up",
        "fused_moe_mxfp4_down",
    }
    # the FP4 tl.dot_scaled kernels: compiled for sm_120, said plainly not interpreter-checked, and why
    dot_scaled = [
        "fused_moe_mxfp4_w4a4_down",
        "fused_moe_mxfp4_w4a4_up",
        "fused_moe_nvfp4_w4a4_down",
        "fused_moe_nvfp4_w4a4_up",
    ]
    assert interp["not_checked"]["kernels"] == dot_scaled
    assert "gotcha 6" in interp["not_checked"]["why"]["fused_moe_mxfp4_w4a4_up"]
    # the paged decode attention: compiled for sm_120, its correctness held to SGLang's own
    # reference by tests/kernels/flash_mla_paged_test.py (the manifest says where)
    assert "_sm120_sparse_decode_fwd" in interp["checked_elsewhere"]["flash_mla_paged"]
    compiled = {r["kernel"] for r in m["checks"]["sm120_compile"]["results"]}
    assert compiled == kernels | set(dot_scaled) | {"flash_mla_paged"}
    assert built.v2.manifest.raw["checks"]["interpreter"]["ran"] is False


def test_archive_is_plain_files_and_reproducible(
    built: Built, tmp_path: Path, warm_aot_cache: ShippedAot
) -> None:
    """The same inputs give the same bytes. The compile results come from the session's cache
    (warm_aot_cache); that a fresh compile elsewhere gives the same cubins is installed_build_test's."""
    with tarfile.open(built.v2.path) as tar:
        assert all(m.isfile() and m.mtime == 0 and m.uid == 0 for m in tar.getmembers())
    with LocalExecutor() as ex:
        again = build(executor=ex, out_dir=tmp_path, version="0.2.0", interpreter=False)
    assert again.sha256 == built.v2.sha256
