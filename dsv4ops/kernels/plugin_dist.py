"""The package as an SGLang plugin distribution, and what each of its files replaces in SGLang.

A built package root holds, besides manifest.json, configs and kernel sources:

    site/dsv4ops_kernel_plugin/__init__.py          the plugin (kernels/sglang_plugin.py)
    site/<dist>-<version>.dist-info/METADATA        Name, Version
    site/<dist>-<version>.dist-info/entry_points.txt  [sglang.srt.plugins] <ep> = dsv4ops_kernel_plugin:register

`site/` on SGLang's sys.path (the rendered env's PYTHONPATH) is a complete installed
distribution: importlib.metadata.entry_points(group="sglang.srt.plugins"), which is what
SGLang's loader calls (plugins/__init__.py L57), finds it. SGLANG_PLUGINS=<ep> names it.
"""

from __future__ import annotations

from importlib import resources

from dsv4ops.kernels.manifest import PACKAGE_ROOT
from dsv4ops.sglang_paths import (
    DEEPGEMM_ENV,
    DEQUANT_ENV,
    PLUGIN_GROUP,
    PLUGIN_SITE,
    TRITON_FP8,
    entry_point_name,
    plugin_env,
)

MODULE = "dsv4ops_kernel_plugin"
SITE = PLUGIN_SITE
# sparse_decode_attn is installed only where the worker's env sets the plugin's switch
# (sglang_plugin.ATTN_SWITCH): a package alone changes no attention.
HOOKS = ("moe_config_witness", "sparse_decode_attn")
ATTN_KERNEL = "kernels/flash_mla_paged.py"
# What the plugin does not register, and why (docs/kernels.md "What the plugin registers").
NOT_REGISTERED = {
    "fused_moe_mxfp4": (
        "flashinfer_mxfp4 runs Mxfp4FlashinferCutlassMoEMethod.apply (mxfp4_flashinfer_cutlass_"
        "moe.py L238) on weights reshuffled for CUTLASS at load; replacing it needs the original "
        "packed layout and a GPU correctness run first"
    ),
    "fused_moe_bf16": (
        "the triton_fp8_dequant path runs SGLang's own fp8_w8a8 Triton kernel with this package's "
        "launch configs (configs/); the package's bf16 kernel does not take FP8 weights"
    ),
}


def plugin_members(name: str, version: str) -> dict[str, bytes]:
    """site/ files of the distribution (deterministic)."""
    dist = f"{entry_point_name(name)}-{version.replace('-', '_')}.dist-info"
    source = resources.files("dsv4ops.kernels").joinpath("sglang_plugin.py").read_bytes()
    return {
        f"{SITE}/{MODULE}/__init__.py": source,
        f"{SITE}/{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: {entry_point_name(name)}\n"
            f"Version: {version}\nSummary: dsv4ops kernel package {name}\n"
        ).encode(),
        f"{SITE}/{dist}/entry_points.txt": (
            f"[{PLUGIN_GROUP}]\n{entry_point_name(name)} = " f"{MODULE}:register\n"
        ).encode(),
        f"{SITE}/{dist}/top_level.txt": f"{MODULE}\n".encode(),
    }


def plugin_section(name: str) -> dict[str, object]:
    return {
        "group": PLUGIN_GROUP,
        "entry_point": entry_point_name(name),
        "module": MODULE,
        "site": f"{PACKAGE_ROOT}/{SITE}",
        "hooks": list(HOOKS),
        "not_registered": NOT_REGISTERED,
    }


def sglang_section() -> dict[str, object]:
    """The SGLang configuration this package is for, and the env that enables it."""
    return {
        "moe_path": TRITON_FP8,
        "requires_env": {DEQUANT_ENV: "1", DEEPGEMM_ENV: "0"},
        "requires_args": {"--moe-runner-backend": "auto"},
        "why": "the only DSV4-Flash MoE path of sglang 0.5.23 that reads a Triton config "
        "(dsv4ops/sglang_paths.py)",
    }


def package_env(name: str, root: str) -> dict[str, str]:
    """What the workers' env needs to load the plugin and read its configs (root: package dir)."""
    return plugin_env(name, root)


def replaces(rel: str) -> dict[str, str]:
    """Per file: what in SGLang it replaces and which code path reads it."""
    if rel.startswith("configs/"):
        return {
            "replaces": "SGLang's get_default_config() launch params for the block-FP8 fused MoE "
            "(fused_moe_triton_config.py L236-245) at this shape",
            "read_by": "fused_moe_triton_config.get_moe_configs (L54-177), triton_fp8_dequant path only",
        }
    if rel.startswith(f"{SITE}/"):
        return {
            "replaces": "nothing: registers the hooks listed under plugin.hooks",
            "read_by": "sglang.srt.plugins.load_plugins (plugins/__init__.py L103-141)",
        }
    if rel == ATTN_KERNEL:
        return {
            "replaces": "sglang.kernels.ops.attention.flash_mla_sm120.flash_mla_with_kvcache_sm120 "
            "(flash_mla_sm120.py L298) on decode calls in the V4 layout, by the plugin's "
            "REPLACE hook, only with DSV4OPS_SPARSE_DECODE_ATTN=1 in the workers' env",
            "read_by": "dsv4ops_kernel_plugin.flash_mla_with_kvcache_sm120 (site/)",
        }
    if rel.startswith(("attention_configs/", "moe_fp4_configs/")):
        return {
            "replaces": "nothing in SGLang (no SGLang code reads this tree)",
            "read_by": "integration/kernels_box_check.py and benchmarks/kernels_gpu.py",
        }
    return {
        "replaces": "nothing in SGLang (kernel source; no hook registers it)",
        "read_by": "integration/kernels_box_check.py and benchmarks/kernels_gpu.py",
    }
