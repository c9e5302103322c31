"""Kernel packages in the twin: SGLang's plugin loader and its MoE config lookup, imitated.

Plugins (sglang/srt/plugins/__init__.py L35-141): every entry point in group
`sglang.srt.plugins` on sys.path (importlib.metadata, as SGLang does), filtered by
SGLANG_PLUGINS, is loaded and called. SGLang logs "Loaded plugin ..." at INFO before its
loggers exist (launch_server.py L79), so the line is lost; the twin calls `load_plugins` before
it configures logging too. A package built by `dsv4ops kernels build` prints its own line; the
twin reports the package whose plugin ran as `twin_kernel_package` (a diagnostic, no evidence:
status reads the log).

MoE configs (fused_moe_triton_config.py L36-177): looked up only when the decode's MoE path is
triton_fp8_dequant (dsv4ops/sglang_paths.py), under the exact name SGLang computes for
DSV4-Flash; `$SGLANG_MOE_CONFIG_DIR/configs` must exist then (SGLang lists it unchecked), and a
missing file logs SGLang's default-config warning. On any other path nothing is read or logged.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

from dsv4ops.sglang_paths import (
    CONFIG_DIR_ENV,
    PLUGIN_GROUP,
    PLUGINS_ENV,
    SGLANG_DEFAULT_LINE,
    SGLANG_FOUND_LINE,
    dsv4_flash_config_names,
    moe_path,
)

BOX_TRITON_VERSION = "3.8.0"
BOX_DEVICE_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
_log = logging.getLogger("sglang.srt.plugins")


@dataclass(frozen=True)
class KernelConfigChoice:
    log_line: str | None  # what SGLang's lookup logs; None when nothing looks anything up
    package: dict[str, str] | None  # the package whose plugin ran (name, version, dir)
    config_dir: str | None  # where the up config was found


def load_plugins(env: dict[str, str] | os._Environ[str]) -> list[dict[str, str]]:
    """SGLang's load_plugins_by_group + calls; returns each plugin's package (from its manifest)."""
    allowed = {x.strip() for x in env.get(PLUGINS_ENV, "").split(",") if x.strip()} or None
    ran = []
    for ep in entry_points(group=PLUGIN_GROUP):
        if allowed is not None and ep.name not in allowed:
            _log.info("Skipping plugin %s (not in SGLANG_PLUGINS)", ep.name)
            continue
        try:
            func = ep.load()
            _log.info("Loaded plugin %s from group %s", ep.name, PLUGIN_GROUP)
            func()
        except Exception:  # SGLang logs and goes on (plugins/__init__.py L83-84, L135-136)
            _log.exception(
                "Failed to load or execute plugin %s from group %s", ep.name, PLUGIN_GROUP
            )
            continue
        package = _package_of(sys.modules.get(getattr(func, "__module__", ""), None))
        if package:
            ran.append(package)
    return ran


def _package_of(module: object) -> dict[str, str] | None:
    root = getattr(module, "ROOT", None)
    if not isinstance(root, Path):
        return None
    try:
        data = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        return {"name": str(data["name"]), "version": str(data["version"]), "dir": str(root)}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def resolve_kernel_config(
    env: dict[str, str] | os._Environ[str],
    argv: list[str] | None = None,
    packages: list[dict[str, str]] | None = None,
) -> KernelConfigChoice:
    """Raises FileNotFoundError, as SGLang does, when the lookup runs and `configs/` is missing."""
    package = packages[0] if packages else None
    if not moe_path(argv or [], dict(env)).reads_triton_configs:
        return KernelConfigChoice(None, package, None)
    up, _down = dsv4_flash_config_names(BOX_DEVICE_NAME)
    base = env.get(CONFIG_DIR_ENV) or ""
    version = env.get("DSV4_TWIN_TRITON_VERSION", BOX_TRITON_VERSION)
    primary = Path(base, "configs", f"triton_{version.replace('.', '_')}", up)
    if not base:
        return KernelConfigChoice(
            f"{SGLANG_DEFAULT_LINE}. Performance might be sub-optimal! "
            f"Config file not found at <sglang>/configs/{primary.parent.name}/{up}",
            package,
            None,
        )
    if primary.is_file():
        return KernelConfigChoice(f"{SGLANG_FOUND_LINE}{primary}.", package, str(primary.parent))
    configs = Path(base, "configs")
    if not configs.is_dir():  # SGLang lists <dir>/configs with no existence check (L115-124)
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{configs}'")
    others = sorted(
        (d for d in configs.glob("triton_*") if (d / up).is_file()),
        key=lambda d: d.name,
        reverse=True,
    )
    if others:
        return KernelConfigChoice(
            f"Config file not found at {primary}. Fallback to triton version "
            f"{others[0].name.removeprefix('triton_').replace('_', '.')} and use MoE "
            f"kernel config from {others[0] / up}. Performance might be sub-optimal!",
            package,
            str(others[0]),
        )
    return KernelConfigChoice(
        f"{SGLANG_DEFAULT_LINE}. Performance might be sub-optimal! Config file not "
        f"found at {primary}",
        package,
        None,
    )
