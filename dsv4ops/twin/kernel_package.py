"""Which MoE kernel config SGLang would use, read from SGLANG_MOE_CONFIG_DIR.

fused_moe_triton_config.py:91-139 looks in `$SGLANG_MOE_CONFIG_DIR/configs/triton_<ver>/`, then
in every other `triton_*` dir, newest first. A package built by `dsv4ops kernels` also carries a
`manifest.json` with `name` and `version`, which the twin reports as `twin_kernel_package`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

BOX_TRITON_VERSION = "3.8.0"


@dataclass(frozen=True)
class KernelConfigChoice:
    log_line: str
    package: dict[str, str] | None
    config_dir: str | None


def _json_files(d: Path) -> list[Path]:
    return sorted(p for p in d.glob("*.json") if p.is_file())


def resolve_kernel_config(env: dict[str, str] | os._Environ[str]) -> KernelConfigChoice:
    """Raises FileNotFoundError, as SGLang does, when the dir has no `configs/` sub-folder."""
    base = env.get("SGLANG_MOE_CONFIG_DIR")
    default = KernelConfigChoice("Using default MoE kernel config", None, None)
    if not base:
        return default
    root = Path(base)
    configs = root / "configs"
    if not configs.is_dir():
        # SGLang lists <dir>/configs with no existence check.
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{configs}'")
    version = env.get("DSV4_TWIN_TRITON_VERSION", BOX_TRITON_VERSION)
    primary = configs / f"triton_{version.replace('.', '_')}"
    others = sorted((d for d in configs.glob("triton_*") if d.is_dir() and d != primary),
                    key=lambda d: d.name, reverse=True)
    chosen = next((d for d in [primary, *others] if d.is_dir() and _json_files(d)), None)
    if chosen is None:
        return default
    package = None
    manifest = root / "manifest.json"
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            package = {"name": str(data["name"]), "version": str(data["version"]), "dir": str(root)}
        except (ValueError, KeyError, TypeError):
            package = None
    return KernelConfigChoice(f"Using MoE kernel config from {root}", package, str(chosen))
