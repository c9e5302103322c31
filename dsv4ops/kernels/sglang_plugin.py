"""The SGLang plugin a kernel package installs (copied to `site/dsv4ops_kernel_plugin/__init__.py`).

Runs inside SGLang's processes, not dsv4ops': it imports nothing from dsv4ops (the box's SGLang
venv has no dsv4ops) and only the standard library at top level. SGLang's `load_plugins()`
(sglang/srt/plugins/__init__.py L103-141) finds it through the entry point in group
`sglang.srt.plugins` of the package's `site/*.dist-info`, calls `register()` in every process it
runs (launch_server.py L79, scheduler.py L6323, detokenizer_manager.py L552), then applies the
registered hooks.

`register()` prints one line to stderr with a fixed prefix: package name, version, pid and the
hooks it registered. stderr, not logging: SGLang configures its loggers only after
load_plugins() (engine.py L286 vs L1152), so an INFO record here would be dropped.

Hooks, from manifest.json's `plugin.hooks`:
- `moe_config_witness`: an AFTER hook on fused_moe_triton_config.get_moe_configs that prints which
  config file SGLang's own lookup returned for each shape (found in this package or not). It
  replaces nothing; it is the evidence that the package's MoE configs were read.
- `sparse_decode_attn`: a REPLACE hook on SGLang's sm_120 decode attention entry point
  `flash_mla_with_kvcache_sm120` (flash_mla_sm120.py L298) by `flash_mla_with_kvcache_sm120` here,
  which runs the package's `kernels/flash_mla_paged.py` on the calls it covers (decode: at most
  SM120_DECODE_MAX_TOKENS tokens, the V4 cache layout) and hands every other call to SGLang's
  original (found through the registry's `__wrapped__`), counting both. Registered only when the
  worker's env has DSV4OPS_SPARSE_DECODE_ATTN=1: a package alone changes no attention.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

# The manifest is untyped JSON; this module runs inside SGLang and may not import
# dsv4ops.jsontypes (nothing from dsv4ops), hence its own name for it here.
_JSONObject = dict[str, Any]

PREFIX = "[dsv4ops-kernel-plugin]"  # == dsv4ops.sglang_paths.PLUGIN_LINE_PREFIX (tested)
MOE_CONFIGS = (
    "sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config.get_moe_configs"
)
_SEEN: set[tuple[object, ...]] = set()
ROOT = Path(__file__).resolve().parents[2]  # <package root>/site/dsv4ops_kernel_plugin/__init__.py
KERNELS = ROOT / "kernels"  # the package's kernel sources (a package: relative imports)
FLASH_MLA_MODULE = "sglang.kernels.ops.attention.flash_mla_sm120"
FLASH_MLA = f"{FLASH_MLA_MODULE}.flash_mla_with_kvcache_sm120"
ATTN_SWITCH = "DSV4OPS_SPARSE_DECODE_ATTN"
# SM120_DECODE_MAX_TOKENS (flash_mla_sm120.py L212): above it SGLang runs its prefill kernel.
DECODE_MAX_TOKENS = 64
# Calls that took our kernel / were handed to SGLang's original, in this process.
CALLS = {"ours": 0, "original": 0}
_KERNEL_PACKAGE = "dsv4ops_kernel_plugin_kernels"
_IMPORT_ERROR: list[str] = []


def _manifest() -> _JSONObject:
    try:
        manifest: _JSONObject = json.loads((ROOT / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest


def _say(text: str) -> None:
    sys.stderr.write(f"{PREFIX} {text}\n")
    sys.stderr.flush()


def _config_witness(
    result: object,
    e: int,
    n: int,
    dtype: str | None,
    block_n: int | None = 0,
    block_k: int | None = 0,
    per_channel_quant: bool = False,
    down_moe: bool = False,
) -> object:
    """AFTER hook: report what SGLang's lookup returned, once per shape; never changes it.

    get_moe_configs runs on every fused-MoE call (it is lru_cached inside), hence the seen set."""
    key = (e, n, dtype, block_n, block_k, per_channel_quant, down_moe)
    if key in _SEEN:
        return result
    _SEEN.add(key)
    here = os.path.realpath(os.environ.get("SGLANG_MOE_CONFIG_DIR", "")) == str(ROOT)
    where = "this package" if here else "another SGLANG_MOE_CONFIG_DIR"
    state = f"found in {where}" if result is not None else "not found (SGLang's default config)"
    _say(
        f"moe-config E={e} N={n} dtype={dtype} block=[{block_n}, {block_k}] "
        f"down={bool(down_moe)}: {state}"
    )
    return result


def _our_kernel() -> ModuleType:
    """The package's flash_mla_paged module (imported once, torch and triton with it)."""
    name = f"{_KERNEL_PACKAGE}.flash_mla_paged"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            _KERNEL_PACKAGE, KERNELS / "__init__.py", submodule_search_locations=[str(KERNELS)]
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"no kernel sources at {KERNELS}")
        package = importlib.util.module_from_spec(spec)
        sys.modules[_KERNEL_PACKAGE] = package
        spec.loader.exec_module(package)
    return importlib.import_module(name)


def _why_not_ours(kwargs: dict[str, object]) -> str | None:
    q = kwargs.get("q")
    tokens = getattr(q, "shape", (0,))[0]
    if tokens > DECODE_MAX_TOKENS:
        return f"{tokens} tokens > SM120_DECODE_MAX_TOKENS={DECODE_MAX_TOKENS} (prefill)"
    if _IMPORT_ERROR:
        return _IMPORT_ERROR[0]
    try:
        why: str | None = _our_kernel().uncovered(kwargs)
    except Exception as exc:  # the original still serves: never fail a forward over our import
        _IMPORT_ERROR.append(f"our kernel did not import: {exc!r}")  # not retried per call
        return _IMPORT_ERROR[0]
    return why


def _count(route: str, why: str) -> None:
    CALLS[route] += 1
    if CALLS[route] == 1:  # once per route and process: the evidence, without a line per call
        _say(f"sparse-decode-attn pid={os.getpid()} first call {route}: {why}")


def flash_mla_with_kvcache_sm120(**kwargs: object) -> object:
    """REPLACE hook: SGLang's `flash_mla_with_kvcache_sm120(**kwargs) -> (out, lse)` on the
    package's kernel where it covers the call, else SGLang's original."""
    why = _why_not_ours(kwargs)
    if why is None:
        _count("ours", "the package's flash_mla_paged kernel")
        return _our_kernel().flash_mla_with_kvcache_sm120(**kwargs)
    _count("original", f"SGLang's own ({why})")
    # The registry's REPLACE wrapper keeps the original as __wrapped__ (hook_registry.py
    # _wrap_fn); unwrap reaches it through any other plugin's wrappers too.
    original = inspect.unwrap(
        importlib.import_module(FLASH_MLA_MODULE).flash_mla_with_kvcache_sm120
    )
    return original(**kwargs)


def register() -> None:
    """The entry point SGLang calls; registers the manifest's hooks and reports them."""
    manifest = _manifest()
    ref = f"{manifest.get('name', '?')} {manifest.get('version', '?')}"
    wanted = (manifest.get("plugin") or {}).get("hooks", [])
    applied: list[str] = []
    try:
        from sglang.srt.plugins.hook_registry import (
            HookRegistry,
            HookType,
        )
    except ImportError as exc:
        _say(f"loaded {ref} pid={os.getpid()} hooks=none (no SGLang hook registry here: {exc})")
        return
    if "moe_config_witness" in wanted:
        HookRegistry.register(MOE_CONFIGS, _config_witness, HookType.AFTER)
        applied.append(f"moe_config_witness:after:{MOE_CONFIGS}")
    if "sparse_decode_attn" in wanted and os.environ.get(ATTN_SWITCH) == "1":
        HookRegistry.register(FLASH_MLA, flash_mla_with_kvcache_sm120, HookType.REPLACE)
        applied.append(f"sparse_decode_attn:replace:{FLASH_MLA}")
    _say(f"loaded {ref} pid={os.getpid()} hooks={','.join(applied) or 'none'}")
