"""Run inside the real-sglang test env (tools/sglang_test_env.sh): SGLang 0.5.23's own
load_plugins() and MoE config lookup against an installed kernel package; prints one JSON line.

    PYTHONPATH=<sglang site>:<package>/site SGLANG_PLUGINS=... SGLANG_MOE_CONFIG_DIR=<package> \
        python testing/programs/kernels_sglang_probe.py

Three things stand in for the box, and only these: the device name (no GPU here), triton's
version (the box runs 3.8.0, this venv 3.7.1) and SGLang's published exec config (normally
published from ServerArgs; deterministic inference off is its default). fused_moe_triton_config
is imported from its file before load_plugins: its package __init__ chain imports GPU-only
dependencies (torchvision, flashinfer, ...) that the CPU env does not have; the module's own code,
and the hook registry applying the plugin's hook to it, are SGLang's.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import json
import logging
import os
import sys
import types
from pathlib import Path

BOX_DEVICE = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
CFG = "sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config"
FLASH_MLA = "sglang.kernels.ops.attention.flash_mla_sm120"
ROOT = Path(__file__).resolve().parents[2]


def _preload_config_module() -> types.ModuleType:
    import sglang

    parts = CFG.split(".")
    for i in range(3, len(parts)):  # empty parents: their real __init__ needs GPU deps
        name = ".".join(parts[:i])
        if name not in sys.modules:
            mod = types.ModuleType(name)
            mod.__path__ = []
            sys.modules[name] = mod
    path = f"{sglang.__path__[0]}/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py"
    spec = importlib.util.spec_from_file_location(CFG, path)
    assert spec is not None and spec.loader is not None, path  # a .py path always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[CFG] = module
    spec.loader.exec_module(module)
    parent = sys.modules[CFG.rsplit(".", 1)[0]]
    # setattr: ModuleType declares none of these attributes, the module under test reads them
    setattr(parent, "fused_moe_triton_config", module)  # noqa: B010 - what a real import sets
    setattr(module, "get_device_name", lambda: BOX_DEVICE)  # noqa: B010
    setattr(module, "triton", types.SimpleNamespace(__version__="3.8.0"))  # noqa: B010
    deterministic = types.SimpleNamespace(enable_deterministic_inference=False)
    setattr(module, "get_exec", lambda: types.SimpleNamespace(deterministic=deterministic))  # noqa: B010
    return module


def main() -> int:
    logs = io.StringIO()
    handler = logging.StreamHandler(logs)
    logging.basicConfig(level=logging.INFO, handlers=[handler, logging.StreamHandler(sys.stderr)])
    cfg = _preload_config_module()
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    load_plugins()
    name = cfg.get_config_file_name(256, 512, "fp8_w8a8", [128, 128])
    table = cfg.get_moe_configs(256, 512, "fp8_w8a8", 128, 128)
    down = cfg.get_moe_configs(256, 512, "fp8_w8a8", 128, 128, down_moe=True)
    print(
        json.dumps(
            {  # noqa: T201 - the probe's one result line
                "config_name": name,
                "found": table is not None,
                "keys": sorted(table or {}),
                "down_found": down is not None,
                "hooks": sorted(HookRegistry._hooks),
                "patched": sorted(HookRegistry._patched),
                "wrapped": hasattr(cfg.get_moe_configs, "__wrapped__"),
                "log": logs.getvalue(),
                "attn": _attention()
                if os.environ.get("DSV4OPS_SPARSE_DECODE_ATTN") == "1"
                else None,
            }
        )
    )
    return 0


def _attention() -> dict[str, object]:
    """SGLang's sm_120 decode entry point as the backend calls it, after load_plugins(): one
    call on a cache in the V4 layout, against the original it replaced (the torch path, with
    SGLANG_SM120_FLASHMLA_BACKEND=torch). The module is SGLang's own import, not a copy: on CPU
    its imports (torch, triton, sglang.srt.environ/utils) all load; Triton runs interpreted."""
    import torch

    sys.path.insert(0, str(ROOT))  # testing.kernels: the seeded case builder the CPU tests use
    from dsv4ops.kernels.interpreter import enable
    from testing.kernels import Case, decode_kwargs

    enable()  # the interpreter's bf16 tl.dot bug (interpreter.py); a GPU compiles the same code

    module = importlib.import_module(FLASH_MLA)
    hooked = module.flash_mla_with_kvcache_sm120
    original = inspect.unwrap(hooked)
    kw = decode_kwargs(Case(2, 16, 32, 32, sink=True), seed=7)
    out, lse = hooked(**kw)
    ref_out, ref_lse = original(**kw)
    rows = [module._gather_and_dequant(kw["k_cache"], kw["indices"].clamp(min=0), 256)]
    extra = kw["extra_indices_in_kvcache"].clamp(min=0)
    rows.append(module._gather_and_dequant(kw["extra_k_cache"], extra, 64))
    max_v = max(float(r.float().abs().max()) for r in rows)
    finite = torch.isfinite(ref_lse)
    return {
        "replaced": hooked is not original,
        "out_max_err": float((out.float() - ref_out.float()).abs().max()),
        "out_tolerance": 2**-8 * max_v + 2**-7 * float(ref_out.float().abs().max()),
        "lse_max_rel_err": float(((lse - ref_lse)[finite] / ref_lse[finite]).abs().max()),
        "same_infinities": bool(torch.equal(torch.isneginf(lse), torch.isneginf(ref_lse))),
    }


if __name__ == "__main__":
    sys.exit(main())
