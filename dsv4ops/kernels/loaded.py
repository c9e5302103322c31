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

4. with the sparse decode attention switched on (decode env DSV4OPS_SPARSE_DECODE_ATTN=1): the
   plugin's `sparse_decode_attn:replace:...` hook in its loaded line, and its once-per-process
   `[dsv4ops-kernel-plugin] sparse-decode-attn pid=... first call ours|original: <why>` lines
   (kernels/sglang_plugin.py `_count`). "ours" means the package's kernel ran a decode call.

States: "in use" (1 and 3; with the switch, 1 and 4's "ours", and 3 too where the MoE path reads
configs), "loaded, configs not read" (1 without 3), "not loaded" (no 1 for the expected package),
"not used by this backend" (the decode's MoE path reads no Triton config and the attention is not
switched on, so nothing the package ships can run), and with the switch: "loaded, attention
not hooked" (no REPLACE hook registered), "loaded, attention not ours" (only calls handed to
SGLang's original), "loaded, no attention call yet". The absence of SGLang's "Using default MoE
kernel config" line is not evidence of anything: the flashinfer path never prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

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
ATTN_NOT_HOOKED = "loaded, attention not hooked"
ATTN_NOT_OURS = "loaded, attention not ours"
ATTN_NO_CALL = "loaded, no attention call yet"
# Which route the plugin's sparse decode attention hook took (LoadedCheck.attention).
ROUTE_OURS, ROUTE_ORIGINAL, ROUTE_NONE = "ours", "original", "no call yet"
_LOADED = re.compile(re.escape(PLUGIN_LINE_PREFIX) + r" loaded (\S+) (\S+) pid=(\d+) hooks=(\S+)")
_FOUND = re.escape(PLUGIN_LINE_PREFIX) + r" moe-config .*: found in this package"
_ROUTE = re.escape(PLUGIN_LINE_PREFIX) + r" sparse-decode-attn pid=\d+ first call {route}:"
_ATTN_HOOK = "sparse_decode_attn:replace:"


@dataclass(frozen=True)
class LoadedCheck:
    used: bool
    package: str | None  # "name@version" the plugin line names, when there is one
    reason: str
    state: str = NOT_LOADED
    evidence: tuple[str, ...] = field(default=())
    # The attention hook's route (ROUTE_*) when the switch asked for it; None when not asked.
    attention: str | None = None


@dataclass(frozen=True)
class _Route:
    route: str | None  # ROUTE_*, None when the hook is not registered
    line: str | None  # the evidence: the "first call ours" line, else the "original" one
    state: str  # the LoadedCheck state when the route is not ours


def _attention_route(lines: list[str], plugin_line: str) -> _Route:
    """What the plugin's attention hook did, from its own lines (the loaded line names it)."""
    if _ATTN_HOOK not in plugin_line:
        return _Route(None, None, ATTN_NOT_HOOKED)
    ours = _first(lines, _ROUTE.format(route=ROUTE_OURS))
    if ours:
        return _Route(ROUTE_OURS, ours, IN_USE)
    original = _first(lines, _ROUTE.format(route=ROUTE_ORIGINAL))
    if original:
        return _Route(ROUTE_ORIGINAL, original, ATTN_NOT_OURS)
    return _Route(ROUTE_NONE, None, ATTN_NO_CALL)


def _attention_reason(route: _Route, plugin_line: str) -> str:
    if route.route is None:
        return (
            f"plugin loaded ({plugin_line}) without the sparse_decode_attn hook: the package "
            "predates it, or DSV4OPS_SPARSE_DECODE_ATTN=1 did not reach the decode's env"
        )
    if route.route == ROUTE_ORIGINAL:
        return (
            f"every decode attention call went to SGLang's original, none to the package's "
            f"kernel ({route.line})"
        )
    return (
        "no decode attention call reached the hook yet (SGLang calls it at CUDA-graph capture "
        "on sm_120; a decode that is not sm_120 never calls it)"
    )


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
    server_info_json: object,
    log_text: str,
    expected: str | None = None,
    moe: MoePath | None = None,
    attention: bool = False,
) -> LoadedCheck:
    """`used` only in state "in use". `moe`: the decode's MoE path (sglang_paths.moe_path);
    without it the check cannot say the configs are readable and stops at "loaded".
    `attention`: the decode's env switched the sparse decode attention on
    (sglang_paths.sparse_attn_asked): then "in use" also needs a call that took our kernel."""
    del server_info_json  # what /server_info says is not evidence (real SGLang names no package)
    lines = log_text.splitlines()
    loaded = _loaded_packages(lines)
    package: str | None = (
        expected if expected in loaded else (next(iter(loaded)) if loaded else None)
    )
    if attention and package is not None and package == (expected or package):
        return _with_attention(lines, loaded[package], package, moe)
    if moe is not None and not moe.reads_triton_configs and not attention:
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


def _with_attention(
    lines: list[str], plugin_line: str, package: str, moe: MoePath | None
) -> LoadedCheck:
    """The expected package loaded and its attention switched on: in use only when a decode
    call took our kernel, and, where the MoE path reads configs, SGLang read the package's."""
    route = _attention_route(lines, plugin_line)
    if route.route != ROUTE_OURS or route.line is None:
        reason = _attention_reason(route, plugin_line)
        return LoadedCheck(False, package, reason, route.state, (plugin_line,), route.route)
    if moe is not None and moe.reads_triton_configs:
        moe_check = loaded_check("", "\n".join(lines), package, moe)
        if not moe_check.used:
            return replace(moe_check, attention=ROUTE_OURS)
        evidence = (*moe_check.evidence, route.line)
    else:
        evidence = (plugin_line, route.line)
    return LoadedCheck(
        True, package, "in use: " + " | ".join(evidence), IN_USE, evidence, ROUTE_OURS
    )
