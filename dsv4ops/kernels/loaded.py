"""Is the deployed kernel package in use? Judged only from positive evidence in the decode's log.

The evidence (docs/kernels.md "Was it used?"):
1. the plugin's own line, printed by every process SGLang loads it into
   (`[dsv4ops-kernel-plugin] loaded <name> <version> pid=... hooks=...`, kernels/sglang_plugin.py);
2. SGLang's "Loaded plugin <ep> from group sglang.srt.plugins" (plugins/__init__.py L82), a
   second witness when present (0.5.23 logs it at INFO before its loggers are configured, so
   it is usually absent and its absence proves nothing);
3. on the one path that reads the package's MoE configs (sglang_paths.TRITON_FP8), SGLang's
   lookup reporting the file: the plugin's `moe-config ... found in this package` line or
   SGLang's "Using MoE kernel config from <package dir>/configs/..." (fused_moe_triton_config.py L110).

States: "in use" (1 and 3), "loaded, configs not read" (1 without 3), "not loaded" (no 1 for the
expected package), "not used by this backend" (the decode's MoE path reads no Triton config, so
nothing the package ships can run). The absence of SGLang's "Using default MoE kernel config"
line is not evidence of anything: the flashinfer path never prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dsv4ops.jsontypes import JSONObject
from dsv4ops.sglang_paths import (
    PLUGIN_GROUP,
    PLUGIN_LINE_PREFIX,
    SGLANG_DEFAULT_LINE,
    SGLANG_FOUND_LINE,
    MoePath,
    entry_point_name,
)

IN_USE = "in use"
LOADED_UNREAD = "loaded, configs not read"
NOT_LOADED = "not loaded"
NOT_USED_BY_BACKEND = "not used by this backend"
_LOADED = re.compile(re.escape(PLUGIN_LINE_PREFIX) + r" loaded (\S+) (\S+) pid=(\d+) hooks=(\S+)")
_FOUND = re.escape(PLUGIN_LINE_PREFIX) + r" moe-config .*: found in this package"


@dataclass(frozen=True)
class LoadedCheck:
    used: bool
    package: str | None  # "name@version" the plugin line names, when there is one
    reason: str
    state: str = NOT_LOADED
    evidence: tuple[str, ...] = field(default=())


def _first(lines: list[str], pattern: str) -> str | None:
    rx = re.compile(pattern)
    return next((ln.strip()[:400] for ln in lines if rx.search(ln)), None)


def _loaded_packages(lines: list[str]) -> dict[str, str]:
    """{"name@version": its first plugin line}."""
    out: dict[str, str] = {}
    for ln in lines:
        m = _LOADED.search(ln)
        if m:
            out.setdefault(f"{m.group(1)}@{m.group(2)}", ln.strip()[:400])
    return out


def loaded_check(
    server_info_json: str | JSONObject,
    log_text: str,
    expected: str | None = None,
    moe: MoePath | None = None,
) -> LoadedCheck:
    """`used` only in state "in use". `moe`: the decode's MoE path (sglang_paths.moe_path);
    without it the check cannot say the configs are readable and stops at "loaded"."""
    del server_info_json  # what /server_info says is not evidence (real SGLang names no package)
    lines = log_text.splitlines()
    loaded = _loaded_packages(lines)
    package: str | None = (
        expected if expected in loaded else (next(iter(loaded)) if loaded else None)
    )
    if moe is not None and not moe.reads_triton_configs:
        seen = f"; the plugin did load ({loaded[package]})" if package else ""
        return LoadedCheck(False, package, f"{moe.why}{seen}", NOT_USED_BY_BACKEND)
    if package is None or (expected and package != expected):
        other = f"; it loaded {', '.join(loaded)} instead" if loaded else ""
        want = expected or "a kernel package"
        return LoadedCheck(
            False,
            package,
            f"no '{PLUGIN_LINE_PREFIX} loaded' line for {want} in the "
            f"decode log (SGLang did not load the plugin: entry point not on its path, "
            f"SGLANG_PLUGINS excluding it, or a log tail too short){other}",
            NOT_LOADED,
        )
    name = package.split("@", 1)[0]
    evidence = [loaded[package]]
    witness = _first(
        lines, re.escape(f"Loaded plugin {entry_point_name(name)} from group {PLUGIN_GROUP}")
    )
    if witness:
        evidence.append(witness)
    read = _first(lines, _FOUND) or _first(
        lines, re.escape(SGLANG_FOUND_LINE) + r".*/" + re.escape(name) + "/"
    )
    if read is None or moe is None:
        default = _first(lines, re.escape(SGLANG_DEFAULT_LINE))
        why = (
            f"SGLang fell back to its default: {default}"
            if default
            else "no config lookup of this package in the log yet"
            if moe
            else "the decode's MoE path is unknown here"
        )
        return LoadedCheck(
            False, package, f"plugin loaded ({evidence[0]}); {why}", LOADED_UNREAD, tuple(evidence)
        )
    evidence.append(read)
    return LoadedCheck(True, package, "in use: " + " | ".join(evidence), IN_USE, tuple(evidence))
