"""The plugin module itself: its line without SGLang's registry, and its config witness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.kernels import sglang_plugin


def test_without_sglang_it_says_so_and_registers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    (tmp_path / "manifest.json").write_text(
        json.dumps({"name": "k", "version": "3", "plugin": {"hooks": ["moe_config_witness"]}})
    )
    monkeypatch.setattr(sglang_plugin, "ROOT", tmp_path)
    sglang_plugin.register()
    line = capsys.readouterr().err
    assert (
        line.startswith("[dsv4ops-kernel-plugin] loaded k 3 pid=")
        and "hooks=none (no SGLang hook registry" in line
    )


def test_the_witness_reports_each_shape_once_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    monkeypatch.setattr(sglang_plugin, "ROOT", tmp_path.resolve())
    monkeypatch.setattr(sglang_plugin, "_SEEN", set())
    monkeypatch.setenv("SGLANG_MOE_CONFIG_DIR", str(tmp_path))
    table = {1: {"BLOCK_SIZE_M": 16}}
    assert sglang_plugin._config_witness(table, 256, 512, "fp8_w8a8", 128, 128) is table
    assert sglang_plugin._config_witness(table, 256, 512, "fp8_w8a8", 128, 128) is table
    assert (
        sglang_plugin._config_witness(None, 256, 512, "fp8_w8a8", 128, 128, down_moe=True) is None
    )
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "[dsv4ops-kernel-plugin] moe-config E=256 N=512 dtype=fp8_w8a8 block=[128, 128] down=False: "
        "found in this package",
        "[dsv4ops-kernel-plugin] moe-config E=256 N=512 dtype=fp8_w8a8 block=[128, 128] down=True: "
        "not found (SGLang's default config)",
    ]
