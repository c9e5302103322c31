"""`loaded_check`: "in use" only on the plugin's own line plus SGLang reading the package's config."""

from __future__ import annotations

import json

from dsv4ops.kernels import loaded_check
from dsv4ops.kernels.loaded import (
    ATTN_NO_CALL,
    ATTN_NOT_HOOKED,
    ATTN_NOT_OURS,
    IN_USE,
    LOADED_UNREAD,
    NOT_LOADED,
    NOT_USED_BY_BACKEND,
    ROUTE_NONE,
    ROUTE_ORIGINAL,
    ROUTE_OURS,
)
from dsv4ops.sglang_paths import moe_path

REF = "dsv4-decode-kernels@0.2.0"
PLUGIN = "[dsv4ops-kernel-plugin] loaded dsv4-decode-kernels 0.2.0 pid=41 hooks=none"
FOUND = (
    "[2026-11-29 10:00:02 TP0] Using MoE kernel config from /w/kernels/dsv4-decode-kernels/0.2.0/"
    "configs/triton_3_8_0/E=256,N=512,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,"
    "dtype=fp8_w8a8,block_shape=[128, 128].json."
)
SGLANG_DEFAULT = (
    "[2026-11-29 10:00:01 TP0] Using default MoE kernel config. Performance might be "
    "sub-optimal! Config file not found at /x/configs/triton_3_8_0/E=256,N=512,...json"
)
TRITON = moe_path([], {"SGLANG_DSV4_FP4_DEQUANT": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"})
FLASHINFER = moe_path([], {})
INFO = json.dumps({"version": "0.5.23"})


def test_a_log_without_the_default_config_line_is_not_loaded() -> None:
    """The old false positive: no "Using default MoE kernel config" line used to mean "in use"."""
    for moe in (None, TRITON):
        result = loaded_check(INFO, "[TP0] Load weight end.\nready\n", expected=REF, moe=moe)
        assert not result.used and result.state == NOT_LOADED, result
        assert "no '[dsv4ops-kernel-plugin] loaded' line" in result.reason


def test_in_use_needs_the_plugin_line_and_sglang_reading_the_package_config() -> None:
    result = loaded_check(INFO, f"{PLUGIN}\n{FOUND}\n", expected=REF, moe=TRITON)
    assert result.used and result.state == IN_USE and result.package == REF
    assert result.evidence == (PLUGIN, FOUND)
    unread = loaded_check(INFO, f"{PLUGIN}\n{SGLANG_DEFAULT}\n", expected=REF, moe=TRITON)
    assert not unread.used and unread.state == LOADED_UNREAD and "fell back" in unread.reason
    unknown_path = loaded_check(INFO, f"{PLUGIN}\n{FOUND}\n", expected=REF)
    assert not unknown_path.used and unknown_path.state == LOADED_UNREAD


def test_sglang_loader_line_is_a_second_witness_when_present() -> None:
    witness = "Loaded plugin dsv4_decode_kernels from group sglang.srt.plugins"
    result = loaded_check(INFO, f"{witness}\n{PLUGIN}\n{FOUND}\n", expected=REF, moe=TRITON)
    assert result.used and result.evidence[1] == witness


def test_another_version_loaded_is_not_the_expected_one() -> None:
    other = PLUGIN.replace("0.2.0", "0.1.0")
    result = loaded_check(INFO, f"{other}\n{FOUND}\n", expected=REF, moe=TRITON)
    assert not result.used and result.state == NOT_LOADED
    assert "it loaded dsv4-decode-kernels@0.1.0 instead" in result.reason


def test_a_backend_that_reads_nothing_never_says_in_use() -> None:
    result = loaded_check(INFO, f"{PLUGIN}\n{FOUND}\n", expected=REF, moe=FLASHINFER)
    assert not result.used and result.state == NOT_USED_BY_BACKEND
    assert (
        "flashinfer_mxfp4 reads no Triton configs" in result.reason
        and "the plugin did load" in result.reason
    )


def test_server_info_is_no_evidence() -> None:
    info = {"twin_kernel_package": {"name": "dsv4-decode-kernels", "version": "0.2.0", "dir": "/w"}}
    assert loaded_check(info, "", expected=REF, moe=TRITON).state == NOT_LOADED


# --- the sparse decode attention switched on (DSV4OPS_SPARSE_DECODE_ATTN=1) --------------------

HOOKED = PLUGIN.replace(
    "hooks=none",
    "hooks=moe_config_witness:after:x,sparse_decode_attn:replace:"
    "sglang.kernels.ops.attention.flash_mla_sm120.flash_mla_with_kvcache_sm120",
)
OURS = (
    "[dsv4ops-kernel-plugin] sparse-decode-attn pid=41 first call ours: "
    "the package's flash_mla_paged kernel"
)
ORIGINAL = (
    "[dsv4ops-kernel-plugin] sparse-decode-attn pid=41 first call original: "
    "SGLang's own (2048 tokens > SM120_DECODE_MAX_TOKENS=64 (prefill))"
)


def test_with_the_attention_switched_on_in_use_needs_a_call_that_took_our_kernel() -> None:
    """On the flashinfer MoE path nothing reads configs: the attention route is the evidence."""
    result = loaded_check(INFO, f"{HOOKED}\n{ORIGINAL}\n{OURS}\n", REF, FLASHINFER, attention=True)
    assert result.used and result.state == IN_USE and result.attention == ROUTE_OURS
    assert result.evidence == (HOOKED, OURS)
    assert result.reason == f"in use: {HOOKED} | {OURS}"


def test_only_calls_handed_to_sglangs_original_are_not_in_use() -> None:
    result = loaded_check(INFO, f"{HOOKED}\n{ORIGINAL}\n", REF, FLASHINFER, attention=True)
    assert not result.used and result.state == ATTN_NOT_OURS
    assert result.attention == ROUTE_ORIGINAL and ORIGINAL in result.reason


def test_no_attention_call_yet_and_no_hook_are_not_in_use() -> None:
    idle = loaded_check(INFO, f"{HOOKED}\n", REF, FLASHINFER, attention=True)
    assert not idle.used and idle.state == ATTN_NO_CALL and idle.attention == ROUTE_NONE
    assert "a decode that is not sm_120 never calls it" in idle.reason
    unhooked = loaded_check(INFO, f"{PLUGIN}\n{OURS}\n", REF, FLASHINFER, attention=True)
    assert not unhooked.used and unhooked.state == ATTN_NOT_HOOKED and unhooked.attention is None
    assert "without the sparse_decode_attn hook" in unhooked.reason


def test_with_the_attention_and_the_triton_moe_path_both_must_show() -> None:
    both = loaded_check(INFO, f"{HOOKED}\n{FOUND}\n{OURS}\n", REF, TRITON, attention=True)
    assert both.used and both.evidence == (HOOKED, FOUND, OURS)
    unread = loaded_check(INFO, f"{HOOKED}\n{OURS}\n", REF, TRITON, attention=True)
    assert not unread.used and unread.state == LOADED_UNREAD and unread.attention == ROUTE_OURS


def test_the_attention_route_of_another_version_is_not_the_expected_package() -> None:
    other = HOOKED.replace("0.2.0", "0.1.0")
    result = loaded_check(INFO, f"{other}\n{OURS}\n", REF, FLASHINFER, attention=True)
    assert not result.used and result.state == NOT_LOADED
