"""What SGLang 0.5.23 reads for DSV4-Flash's decode kernels, per MoE path, with file:line.

A leaf module (no dsv4ops imports) because three layers need the same facts: `kernels` builds a
package for one path, `profiles` refuses a package nothing would load, and the twin imitates the
lookup. Every line cited is in the sglang 0.5.23 wheel (`sglang/srt/...`); docs/kernels.md has
the whole table.

The MoE runner a DSV4-Flash decode runs (MXFP4 routed experts, sm_120, `--moe-a2a-backend none`):

- `--moe-runner-backend auto` (the default), no env: arg_groups/model_overrides/deepseek_v4.py
  L66-88 picks `flashinfer_mxfp4`; fp8.py L459-466 returns Mxfp4FlashinferCutlassMoEMethod
  (MXFP8 x MXFP4 CUTLASS). No Triton config is read.
- `auto` + `SGLANG_DSV4_FP4_DEQUANT=1`: the override is skipped (deepseek_v4.py L79), fp8.py
  L425-429 returns Fp8MoEMethod and L2196-2214 casts the experts to FP8 e4m3 with 128x128 block
  scales (cast_e2m1fn_to_e4m3fn, L216-258). Its runner (fp8.py L2962-2972) is deep_gemm when
  DeepGEMM's JIT is on and has the SM120 APIs (deep_gemm_wrapper/configurer.py L32-52), else
  triton; `SGLANG_ENABLE_JIT_DEEPGEMM=0` makes it triton. Triton's fused MoE then looks up
  `E=256,N=512,device_name=<dev>,dtype=fp8_w8a8,block_shape=[128, 128].json` (+ `_down`):
  fused_moe.py L464-483 -> fused_moe_triton_config.py L36-51 (name), L91-103 (directory).
- `--moe-runner-backend triton` without the env: Fp8MoEMethod on the still-packed FP4 experts
  (w13 [E, 2N, K/2] int8); fused_moe.py L1119 fails "Hidden size mismatch" at the first forward.
- `triton` with `SGLANG_DSV4_FP4_DEQUANT=1`: fp8.py L426 asserts the runner is auto.
- `marlin` / `humming` / `flashinfer_*`: their own kernels (fp8.py L445-472); no Triton config.

Attention: DSV4 always runs the `dsv4` backend (deepseek_v4.py L51-64); on sm_120 decode calls
`flash_mla_with_kvcache_sm120` (layers/attention/deepseek_v4_backend.py L4335-4360). Nothing in
SGLang reads a Triton attention config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The plugin framework (sglang/srt/plugins/__init__.py L27-86).
PLUGIN_GROUP = "sglang.srt.plugins"
PLUGINS_ENV = "SGLANG_PLUGINS"  # comma-separated entry-point names; unset = load every plugin
CONFIG_DIR_ENV = "SGLANG_MOE_CONFIG_DIR"
DEQUANT_ENV = "SGLANG_DSV4_FP4_DEQUANT"
DEEPGEMM_ENV = "SGLANG_ENABLE_JIT_DEEPGEMM"
# The line every process the plugin loads into prints (the positive "loaded" signal).
PLUGIN_LINE_PREFIX = "[dsv4ops-kernel-plugin]"
# SGLang's own line (plugins/__init__.py L82). Logged at INFO before configure_logger runs
# (launch_server.py L79, scheduler.py L6323), so on 0.5.23 it is usually not in the log.
SGLANG_LOADED_LINE = "Loaded plugin {name} from group " + PLUGIN_GROUP
SGLANG_DEFAULT_LINE = "Using default MoE kernel config"  # fused_moe_triton_config.py L162-176
SGLANG_FOUND_LINE = "Using MoE kernel config from "  # fused_moe_triton_config.py L110

# DSV4-Flash per decode rank at TP4: 256 routed experts, moe_intermediate 2048 / 4.
DSV4_FLASH_E = 256
DSV4_FLASH_N_TP4 = 512
DSV4_WEIGHT_BLOCK = (128, 128)  # the FP8 block the dequant casts to (fp8.py L226)

TRITON_FP8 = "triton_fp8_dequant"  # the one path that reads a Triton MoE config
FLASHINFER_MXFP4 = "flashinfer_mxfp4"
MOE_PATHS = (TRITON_FP8, FLASHINFER_MXFP4)


PLUGIN_SITE = "site"  # <package root>/site: the installed plugin distribution


def entry_point_name(package: str) -> str:
    """A kernel package's entry-point (and SGLANG_PLUGINS) name: its name as an identifier."""
    return re.sub(r"\W", "_", package)


def plugin_env(package: str, root: str) -> dict[str, str]:
    """The workers' env that loads a package's plugin and points SGLang's lookup at its configs."""
    return {
        CONFIG_DIR_ENV: root,
        PLUGINS_ENV: entry_point_name(package),
        "PYTHONPATH": f"{root}/{PLUGIN_SITE}",
    }


@dataclass(frozen=True)
class MoePath:
    """What a decode's args/env make SGLang run for DSV4-Flash's experts."""

    name: str  # TRITON_FP8 | FLASHINFER_MXFP4 | deep_gemm | marlin | ... | "fails"
    reads_triton_configs: bool
    why: str  # file:line and the reason, for an operator


def moe_config_file_name(
    e: int,
    n: int,
    device_name: str,
    dtype: str | None,
    block_shape: tuple[int, int] | None = None,
    down: bool = False,
) -> str:
    """fused_moe_triton_config.py L36-51, character for character (the list's repr has a space)."""
    dtype_sel = f",dtype={dtype}" if dtype else ""
    block_sel = f",block_shape={list(block_shape)}" if block_shape and all(block_shape) else ""
    return (
        f"E={e},N={n},device_name={device_name.replace(' ', '_')}{dtype_sel}{block_sel}"
        f"{'_down' if down else ''}.json"
    )


def dsv4_flash_config_names(device_name: str) -> tuple[str, str]:
    """(up, down) names SGLang looks up on the triton_fp8_dequant path at TP4."""
    return tuple(
        moe_config_file_name(
            DSV4_FLASH_E, DSV4_FLASH_N_TP4, device_name, "fp8_w8a8", DSV4_WEIGHT_BLOCK, down
        )
        for down in (False, True)
    )  # type: ignore[return-value]


def _flag(args: list[str] | tuple[str, ...], name: str, default: str) -> str:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def _on(env: dict[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def moe_path(args: list[str] | tuple[str, ...], env: dict[str, str]) -> MoePath:
    """The MoE path of a DSV4-Flash (MXFP4 experts) decode on sm_120 with these args and env."""
    runner = _flag(args, "--moe-runner-backend", "auto")
    dequant = _on(env, DEQUANT_ENV, False)
    if runner == "auto" and dequant:
        if _on(env, DEEPGEMM_ENV, True):
            return MoePath(
                "deep_gemm",
                False,
                f"{DEQUANT_ENV}=1 runs Fp8MoEMethod, whose auto runner is deep_gemm while "
                f"DeepGEMM's JIT has the SM120 APIs (fp8.py L2962-2964, deep_gemm_wrapper/"
                f"configurer.py L32-52); set {DEEPGEMM_ENV}=0 for triton",
            )
        return MoePath(
            TRITON_FP8,
            True,
            "Fp8MoEMethod on FP8-cast experts, triton runner (fp8.py L425-429, L2196-2214, "
            "L2962-2972): fused_moe_triton_config.py L36-103 reads the dtype=fp8_w8a8 config",
        )
    if runner in ("auto", FLASHINFER_MXFP4):
        return MoePath(
            FLASHINFER_MXFP4,
            False,
            "flashinfer_mxfp4 reads no Triton configs (deepseek_v4.py L66-88 selects it; "
            "fp8.py L459-466 runs Mxfp4FlashinferCutlassMoEMethod)",
        )
    if runner == "triton":
        why = (
            f"{DEQUANT_ENV}=1 asserts --moe-runner-backend auto (fp8.py L425-428)"
            if dequant
            else "the FP4 experts stay packed and fused_moe.py L1119 fails 'Hidden size mismatch'; "
            f"use {DEQUANT_ENV}=1 with --moe-runner-backend auto"
        )
        return MoePath("fails", False, f"--moe-runner-backend triton on DSV4-Flash: {why}")
    return MoePath(
        runner,
        False,
        f"--moe-runner-backend {runner} runs its own kernels and reads no "
        "Triton configs (fp8.py L445-472)",
    )


# The kernel package plugin's switch for its REPLACE hook on the sm_120 decode attention entry
# point (kernels/sglang_plugin.py ATTN_SWITCH; the plugin cannot import dsv4ops, so tested equal).
SPARSE_ATTN_ENV = "DSV4OPS_SPARSE_DECODE_ATTN"
SPARSE_ATTN_CALLEE = "flash_mla_with_kvcache_sm120"


def sparse_attn_asked(env: dict[str, str]) -> bool:
    """The plugin registers the hook only for exactly "1" (sglang_plugin.register)."""
    return env.get(SPARSE_ATTN_ENV) == "1"


def sparse_attn_blocker(args: list[str] | tuple[str, ...]) -> str | None:
    """Why a DSV4 decode with these args would never call the entry point the hook replaces, or
    None. Only the `dsv4` backend calls it, and only on CUDA sm_120 (deepseek_v4_backend.py
    L4335-4360, `get_platform().is_sm120`); deepseek_v4.py L24 sets attention_backend dsv4, and
    keeps another device (npu) on its own variant (L52-60)."""
    device = _flag(args, "--device", "cuda")
    if device != "cuda":
        return f"--device {device}: the sm_120 entry point is CUDA's (deepseek_v4.py L52-60)"
    for flag in ("--attention-backend", "--decode-attention-backend"):
        backend = _flag(args, flag, "dsv4")
        if backend != "dsv4":
            return (
                f"{flag} {backend}: only the dsv4 backend calls {SPARSE_ATTN_CALLEE} "
                "(deepseek_v4_backend.py L4335-4360)"
            )
    return None
