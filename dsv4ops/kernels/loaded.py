"""Was the deployed kernel package actually used? Judged from /server_info and the server log.

SGLang logs "Using default MoE kernel config. Performance might be sub-optimal!" when no tuned
config file matched (sglang PR#12343/#20565); the twin logs the same line and reports the
package it loaded (name/version from manifest.json at SGLANG_MOE_CONFIG_DIR) under
`twin_kernel_package` in /server_info.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_CONFIG_LINE = "Using default MoE kernel config"


@dataclass(frozen=True)
class LoadedCheck:
    used: bool
    package: str | None  # "name@version" the server reports, when it reports one
    reason: str


def loaded_check(server_info_json: str | dict[str, Any], log_text: str,
                 expected: str | None = None) -> LoadedCheck:
    """`used` is True only if the log has no default-config line and, when the server reports a
    package (the twin does), it is `expected` ("name@version") when given."""
    info = json.loads(server_info_json) if isinstance(server_info_json, str) else server_info_json
    reported = info.get("twin_kernel_package") if isinstance(info, dict) else None
    package = f"{reported['name']}@{reported['version']}" if isinstance(reported, dict) and reported.get("name") else None
    if DEFAULT_CONFIG_LINE in log_text:
        line = next(ln for ln in log_text.splitlines() if DEFAULT_CONFIG_LINE in ln)
        return LoadedCheck(False, package, f"server fell back to default MoE configs: {line.strip()[:200]}")
    if expected and package and package != expected:
        return LoadedCheck(False, package, f"server loaded {package}, expected {expected}")
    if expected and not package and "twin_kernel_package" in (info or {}):
        return LoadedCheck(False, None, f"server reports no kernel package, expected {expected}")
    return LoadedCheck(True, package, f"tuned configs in use ({package or 'no default-config line in the log'})")
