"""The twin's MoE config lookup: only on the triton path, under SGLang's exact DSV4-Flash name."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.sglang_paths import dsv4_flash_config_names
from dsv4ops.twin.kernel_package import BOX_DEVICE_NAME, resolve_kernel_config

TRITON_ENV = {"SGLANG_DSV4_FP4_DEQUANT": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
UP = dsv4_flash_config_names(BOX_DEVICE_NAME)[0]


def test_the_flashinfer_path_looks_nothing_up(tmp_path: Path) -> None:
    choice = resolve_kernel_config(
        {"SGLANG_MOE_CONFIG_DIR": str(tmp_path)}
    )  # no configs/: no crash
    assert choice.log_line is None and choice.config_dir is None


def test_no_dir_means_sglang_default_config() -> None:
    choice = resolve_kernel_config(dict(TRITON_ENV))
    assert choice.log_line is not None
    assert choice.log_line.startswith("Using default MoE kernel config") and UP in choice.log_line


def test_the_exact_name_is_found_and_any_other_is_not(tmp_path: Path) -> None:
    d = tmp_path / "configs" / "triton_3_8_0"
    d.mkdir(parents=True)
    (d / UP.replace(",dtype=fp8_w8a8,block_shape=[128, 128]", "")).write_text(
        "{}"
    )  # the old no-dtype name
    env = {**TRITON_ENV, "SGLANG_MOE_CONFIG_DIR": str(tmp_path)}
    default = resolve_kernel_config(env).log_line
    assert default is not None and default.startswith("Using default MoE kernel config")
    (d / UP).write_text("{}")
    choice = resolve_kernel_config(env)
    assert (
        choice.log_line == f"Using MoE kernel config from {d / UP}." and choice.config_dir == str(d)
    )


def test_other_triton_dir_is_a_fallback(tmp_path: Path) -> None:
    other = tmp_path / "configs" / "triton_3_7_1"
    other.mkdir(parents=True)
    (other / UP).write_text("{}")
    choice = resolve_kernel_config({**TRITON_ENV, "SGLANG_MOE_CONFIG_DIR": str(tmp_path)})
    assert choice.config_dir == str(other) and "Fallback to triton version 3.7.1" in (
        choice.log_line or ""
    )


def test_dir_without_configs_subfolder_crashes_like_sglang_on_the_triton_path(
    tmp_path: Path,
) -> None:
    with pytest.raises(FileNotFoundError):
        resolve_kernel_config({**TRITON_ENV, "SGLANG_MOE_CONFIG_DIR": str(tmp_path)})
