"""Through the real part: SGLang 0.5.23's own load_plugins() and MoE config lookup against a
package built by `dsv4ops kernels build` and installed the way deploy installs it.

Needs the real-sglang env (`make test-sglang` builds it: tools/sglang_test_env.sh, and sets
SGLANG_REAL_TESTS=1, not DSV4OPS_-prefixed: tests/conftest.py clears those); skipped otherwise,
so `make test` stays within the CI budget. The cheap tests (no env) check sglang_paths' name rule
against the fixture, and the fixture against the pinned wheel `make install` fetches
(tools/fetch_sglang_wheel.sh), so `make test` still fails if the rule drifts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from dsv4ops.jsontypes import JSONObject
from dsv4ops.sglang_paths import moe_config_file_name, plugin_env
from tools.sglang_wheel import MISSING, WHEEL, source

SITE = Path(os.environ.get("SGLANG_TEST_SITE", ".dsv4ops/sglang-site")).resolve()
PROBE = Path(__file__).resolve().parents[2] / "testing" / "programs" / "kernels_sglang_probe.py"
BOX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
# fused_moe_triton_config.py L36-51 (sglang 0.5.23), verbatim: the fixture the cheap test holds.
SGLANG_NAME_RULE = (
    'return f"E={E},N={N},device_name={device_name}{dtype_selector}{block_shape_selector}'
    '{per_channel_quant_selector}{down_moe_selector}.json"'
)


def test_the_name_rule_matches_sglang_and_the_shipped_file() -> None:
    name = moe_config_file_name(256, 512, BOX, "fp8_w8a8", (128, 128))
    assert name == (
        "E=256,N=512,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,"
        "dtype=fp8_w8a8,block_shape=[128, 128].json"
    )
    shipped = Path(__file__).resolve().parents[2] / "dsv4ops/kernels/sources/configs/triton_3_8_0"
    assert (shipped / name).is_file() and (shipped / name.replace(".json", "_down.json")).is_file()


@pytest.mark.skipif(not WHEEL.is_file(), reason=MISSING)
def test_the_name_rule_fixture_is_the_wheels_own_text() -> None:
    """Holds the verbatim rule above to the pinned wheel (`make install` fetches it, so CI too)."""
    rule = source("srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py")
    assert SGLANG_NAME_RULE in rule


@pytest.mark.sglang
@pytest.mark.kernels
def test_sglang_loads_the_built_plugin_and_finds_its_config(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:  # noqa: ANN001
    env = _installed(request, tmp_path)
    built = request.getfixturevalue("built")
    root = next(tmp_path.glob("dsv4-decode-kernels-*"))
    out, stderr = _probe(env)
    assert out["config_name"] == moe_config_file_name(256, 512, BOX, "fp8_w8a8", (128, 128))
    assert out["found"] and out["down_found"] and 1 in out["keys"] and 96 in out["keys"]
    target = "sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config.get_moe_configs"
    assert out["hooks"] == [target] and out["patched"] == [target] and out["wrapped"]
    assert "Loaded plugin dsv4_decode_kernels from group sglang.srt.plugins" in out["log"]
    assert f"Using MoE kernel config from {root}/configs/triton_3_8_0/" in out["log"]
    # The plugin's own lines: loaded (with the hook it registered), then its hook on the real
    # get_moe_configs reporting SGLang's result: the evidence kernels/loaded.py reads.
    assert (
        f"[dsv4ops-kernel-plugin] loaded dsv4-decode-kernels {built.v2.manifest.version} pid="
        in stderr
    )
    assert f"hooks=moe_config_witness:after:{target}" in stderr
    assert (
        "[dsv4ops-kernel-plugin] moe-config E=256 N=512 dtype=fp8_w8a8 block=[128, 128] "
        "down=False: found in this package"
    ) in stderr

    # SGLANG_PLUGINS naming another plugin: SGLang skips ours, nothing registered.
    skipped, stderr = _probe({**env, "SGLANG_PLUGINS": "someone_else"})
    assert skipped["hooks"] == [] and "Skipping plugin dsv4_decode_kernels" in skipped["log"]
    assert "[dsv4ops-kernel-plugin]" not in stderr


@pytest.mark.sglang
@pytest.mark.kernels
def test_sglang_calls_our_decode_attention_through_its_own_hook(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Issue 41 item 3 through the real part: SGLang's load_plugins() registers the package's
    REPLACE hook (the profile's switch on), and SGLang's own flash_mla_with_kvcache_sm120, called
    as deepseek_v4_backend.py calls it, runs our kernel and agrees with the original it replaced."""
    env = _installed(request, tmp_path)
    env.update(
        DSV4OPS_SPARSE_DECODE_ATTN="1", TRITON_INTERPRET="1", SGLANG_SM120_FLASHMLA_BACKEND="torch"
    )
    out, stderr = _probe(env)
    target = "sglang.kernels.ops.attention.flash_mla_sm120.flash_mla_with_kvcache_sm120"
    assert target in out["hooks"] and target in out["patched"]
    attn = out["attn"]
    assert attn["replaced"] and attn["same_infinities"]
    assert attn["out_max_err"] <= attn["out_tolerance"]
    assert attn["lse_max_rel_err"] <= 1e-4
    assert "sparse-decode-attn pid=" in stderr and "first call ours" in stderr
    assert "first call original" not in stderr


def _installed(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The built package unpacked as deploy installs it; the env SGLang's loader finds it by."""
    if (
        os.environ.get("SGLANG_REAL_TESTS") != "1"
        or not (SITE / "sglang/srt/plugins/__init__.py").is_file()
    ):
        pytest.skip(f"runs in `make test-sglang` (SGLANG_REAL_TESTS=1, env at {SITE}); ~70 s")
    built = request.getfixturevalue("built")  # only when the env is there: the build is slow
    with tarfile.open(built.v2.path) as tar:
        tar.extractall(tmp_path, filter="data")
    root = next(tmp_path.glob("dsv4-decode-kernels-*"))
    env = {**os.environ, **plugin_env("dsv4-decode-kernels", str(root))}
    env["PYTHONPATH"] = f"{SITE}:{env['PYTHONPATH']}"
    return env


def _probe(env: dict[str, str]) -> tuple[JSONObject, str]:
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(PROBE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr
