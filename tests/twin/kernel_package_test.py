from __future__ import annotations

import json

import pytest

from dsv4ops.twin.kernel_package import resolve_kernel_config


def test_no_dir_means_sglang_default_config():
    choice = resolve_kernel_config({})
    assert choice.log_line == "Using default MoE kernel config" and choice.package is None


def test_package_with_configs_and_manifest_is_reported(tmp_path):
    d = tmp_path / "configs" / "triton_3_8_0"
    d.mkdir(parents=True)
    (d / "E=256,N=256,device_name=X.json").write_text("{}")
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "moe-sm120", "version": "1.2"}))
    choice = resolve_kernel_config({"SGLANG_MOE_CONFIG_DIR": str(tmp_path)})
    assert choice.log_line == f"Using MoE kernel config from {tmp_path}"
    assert choice.package == {"name": "moe-sm120", "version": "1.2", "dir": str(tmp_path)}
    assert choice.config_dir == str(d)


def test_other_triton_dir_is_a_fallback_and_empty_dirs_mean_default(tmp_path):
    (tmp_path / "configs" / "triton_3_8_0").mkdir(parents=True)
    assert resolve_kernel_config({"SGLANG_MOE_CONFIG_DIR": str(tmp_path)}).package is None
    other = tmp_path / "configs" / "triton_3_7_1"
    other.mkdir()
    (other / "a.json").write_text("{}")
    assert resolve_kernel_config({"SGLANG_MOE_CONFIG_DIR": str(tmp_path)}).config_dir == str(other)


def test_dir_without_configs_subfolder_crashes_like_sglang(tmp_path):
    with pytest.raises(FileNotFoundError):
        resolve_kernel_config({"SGLANG_MOE_CONFIG_DIR": str(tmp_path)})
