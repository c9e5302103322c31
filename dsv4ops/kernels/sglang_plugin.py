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
No kernel is replaced: see docs/kernels.md "What the plugin registers".
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
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
    _say(f"loaded {ref} pid={os.getpid()} hooks={','.join(applied) or 'none'}")
