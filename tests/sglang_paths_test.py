"""`dsv4ops/sglang_paths.py`: the MoE path per decode args/env, SGLang's config name, the plugin env."""

from __future__ import annotations

import pytest

from dsv4ops.kernels import sglang_plugin
from dsv4ops.sglang_paths import (
    FLASHINFER_MXFP4,
    PLUGIN_LINE_PREFIX,
    SPARSE_ATTN_ENV,
    TRITON_FP8,
    dsv4_flash_config_names,
    entry_point_name,
    moe_config_file_name,
    moe_path,
    plugin_env,
    sparse_attn_asked,
    sparse_attn_blocker,
)

DEQUANT = {"SGLANG_DSV4_FP4_DEQUANT": "1"}


@pytest.mark.parametrize(
    ("args", "env", "name", "reads"),
    [
        ([], {}, FLASHINFER_MXFP4, False),
        (["--moe-runner-backend", "flashinfer_mxfp4"], {}, FLASHINFER_MXFP4, False),
        ([], {**DEQUANT, "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}, TRITON_FP8, True),
        (
            ["--moe-runner-backend=auto"],
            {**DEQUANT, "SGLANG_ENABLE_JIT_DEEPGEMM": "false"},
            TRITON_FP8,
            True,
        ),
        ([], DEQUANT, "deep_gemm", False),
        (["--moe-runner-backend", "triton"], {}, "fails", False),
        (
            ["--moe-runner-backend", "triton"],
            {**DEQUANT, "SGLANG_ENABLE_JIT_DEEPGEMM": "0"},
            "fails",
            False,
        ),
        (["--moe-runner-backend", "marlin"], {}, "marlin", False),
    ],
)
def test_moe_path_follows_sglangs_selection(
    args: list[str], env: dict[str, str], name: str, reads: bool
) -> None:
    path = moe_path(args, env)
    assert (path.name, path.reads_triton_configs) == (name, reads)
    assert " L" in path.why  # every answer cites SGLang's source


def test_config_names_are_sglangs_for_dsv4_flash_at_tp4() -> None:
    up, down = dsv4_flash_config_names("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert up == (
        "E=256,N=512,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,"
        "dtype=fp8_w8a8,block_shape=[128, 128].json"
    )
    assert down == up.replace(".json", "_down.json")
    assert (
        moe_config_file_name(256, 512, "X Y", None) == "E=256,N=512,device_name=X_Y.json"
    )  # unquantised


def test_plugin_env_and_the_plugins_own_prefix() -> None:
    assert entry_point_name("dsv4-decode-kernels") == "dsv4_decode_kernels"
    assert plugin_env("dsv4-decode-kernels", "/w/k/0.2.0") == {
        "SGLANG_MOE_CONFIG_DIR": "/w/k/0.2.0",
        "SGLANG_PLUGINS": "dsv4_decode_kernels",
        "PYTHONPATH": "/w/k/0.2.0/site",
    }
    assert sglang_plugin.PREFIX == PLUGIN_LINE_PREFIX  # the plugin cannot import dsv4ops
    assert sglang_plugin.ATTN_SWITCH == SPARSE_ATTN_ENV


def test_sparse_attention_switch_and_what_keeps_its_path_from_running() -> None:
    assert sparse_attn_asked({SPARSE_ATTN_ENV: "1"})
    assert not sparse_attn_asked({SPARSE_ATTN_ENV: "true"})  # the plugin reads exactly "1"
    assert not sparse_attn_asked({})
    assert sparse_attn_blocker([]) is None
    assert sparse_attn_blocker(["--attention-backend", "dsv4"]) is None
    assert "only the dsv4 backend" in str(sparse_attn_blocker(["--decode-attention-backend=fa3"]))
    assert "CUDA's" in str(sparse_attn_blocker(["--device", "npu"]))
