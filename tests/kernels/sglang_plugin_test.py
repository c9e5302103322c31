"""The plugin module itself: its line without SGLang's registry, its config witness, and its
decode attention REPLACE hook through SGLang 0.5.23's own hook registry (from the pinned wheel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.kernels import sglang_plugin
from dsv4ops.kernels.catalog import kernels_dir
from testing.kernels import Case, decode_kwargs, sglang_flash_mla, sglang_registry
from tools.sglang_wheel import MISSING, WHEEL


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


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin as a package installs it: its manifest asks for both hooks, its kernels are
    the package's sources; fresh call counts."""
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "name": "k",
                "version": "3",
                "plugin": {"hooks": ["moe_config_witness", "sparse_decode_attn"]},
            }
        )
    )
    monkeypatch.setattr(sglang_plugin, "ROOT", tmp_path)
    monkeypatch.setattr(sglang_plugin, "KERNELS", kernels_dir())
    monkeypatch.setattr(sglang_plugin, "CALLS", {"ours": 0, "original": 0})
    monkeypatch.setattr(sglang_plugin, "_IMPORT_ERROR", [])
    return tmp_path


@pytest.mark.kernels
@pytest.mark.skipif(not WHEEL.is_file(), reason=MISSING)
def test_the_switch_replaces_sglangs_decode_attention_through_its_own_registry(
    plugin_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """register() + SGLang's apply_hooks(): the entry point SGLang's backend imports now runs our
    kernel on a decode call and SGLang's original on a prefill-sized one, counting both."""
    torch = pytest.importorskip("torch")
    from dsv4ops.kernels.sources.flash_mla_paged import flash_mla_with_kvcache_sm120 as ours

    monkeypatch.setenv(sglang_plugin.ATTN_SWITCH, "1")
    flash_mla = sglang_flash_mla(plugin_dir / "wheel")
    original = flash_mla.flash_mla_with_kvcache_sm120
    with sglang_registry(plugin_dir / "wheel", flash_mla) as registry:
        registry.HookRegistry.reset()
        sglang_plugin.register()
        registry.HookRegistry.apply_hooks()
        entry = flash_mla.flash_mla_with_kvcache_sm120
        assert entry is not original and entry.__wrapped__ is original
        decode = decode_kwargs(Case(1, 16, 16, 16, sink=True), seed=1)
        out, lse = entry(**decode)
        expected = ours(**decode)
        assert torch.equal(out, expected[0]) and torch.equal(lse, expected[1])
        prefill = decode_kwargs(Case(65, 16, 16, 0, sink=True), seed=2)
        out, lse = entry(**prefill)
        ref = original(**prefill)  # backend "torch": SGLang's _sm120_sparse_decode_fwd
        assert torch.equal(out, ref[0]) and torch.equal(lse, ref[1])
        registry.HookRegistry.reset()
    assert sglang_plugin.CALLS == {"ours": 1, "original": 1}
    err = capsys.readouterr().err
    assert f"hooks=moe_config_witness:after:{sglang_plugin.MOE_CONFIGS}," in err
    assert f"sparse_decode_attn:replace:{sglang_plugin.FLASH_MLA}" in err
    assert "first call ours: the package's flash_mla_paged kernel" in err
    assert "first call original: SGLang's own (65 tokens > SM120_DECODE_MAX_TOKENS=64" in err


@pytest.mark.kernels
@pytest.mark.skipif(not WHEEL.is_file(), reason=MISSING)
def test_without_the_switch_sglangs_attention_is_left_alone(
    plugin_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flash_mla = sglang_flash_mla(plugin_dir / "wheel")
    original = flash_mla.flash_mla_with_kvcache_sm120
    with sglang_registry(plugin_dir / "wheel", flash_mla) as registry:
        registry.HookRegistry.reset()
        sglang_plugin.register()
        registry.HookRegistry.apply_hooks()
        assert flash_mla.flash_mla_with_kvcache_sm120 is original
        assert sglang_plugin.FLASH_MLA not in registry.HookRegistry._hooks
        registry.HookRegistry.reset()
    assert "sparse_decode_attn" not in capsys.readouterr().err
