"""The package manifest: what a kernel artifact holds, what it targets, what checked it.

`manifest.json` sits at the package root (the directory SGLANG_MOE_CONFIG_DIR points at), so the
twin and `kernels list` read name/version from there. Schema 1 fields:

    schema, name, version
    target     {arch, device_names, max_shared_per_block}
    toolchain  {triton, torch, sglang}: what the box runs and the package is built for
    checks     {sm120_compile: {triton, ptxas, results}, interpreter: {torch, triton, cases,
                not_checked: {kernels, reason}}}   (not_checked: NVFP4 tl.dot_scaled, AOT only)
    model      {..., moe_weights: {bf16, nvfp4, mxfp4}}: which MoE weight formats ship where
    config_keys, env {SGLANG_MOE_CONFIG_DIR: "<package root>"}, tuning {measured, note}
    files      [{path, sha256, size, role, lands_at}]
"""

from __future__ import annotations

from dataclasses import dataclass

from dsv4ops.errors import KernelPackageError
from dsv4ops.jsontypes import JSONObject, JSONValue

SCHEMA = 1
PACKAGE_ROOT = "<package root>"


@dataclass(frozen=True)
class TargetRuntime:
    """What a target runs, as far as kernel packages care. `source` says how it was learned."""

    arch: str
    triton: str
    device_names: tuple[str, ...] = ()
    source: str = "probed"


@dataclass(frozen=True)
class Manifest:
    name: str
    version: str
    arch: str
    device_names: tuple[str, ...]
    triton: str
    config_keys: tuple[str, ...]
    files: tuple[JSONObject, ...]
    raw: JSONObject

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


def parse(raw: JSONValue, source: str) -> Manifest:
    """Validate a manifest dict; raises KernelPackageError naming the source and the field."""
    if not isinstance(raw, dict):
        raise KernelPackageError(f"{source}: manifest is not a JSON object")
    if raw.get("schema") != SCHEMA:
        raise KernelPackageError(
            f"{source}: manifest schema {raw.get('schema')!r} is not {SCHEMA}",
            hint="build the package with this version of dsv4ops",
        )
    try:
        m = Manifest(
            name=_str(raw["name"], "name"),
            version=_str(raw["version"], "version"),
            arch=_str(raw["target"]["arch"], "target.arch"),
            device_names=tuple(raw["target"]["device_names"]),
            triton=_str(raw["toolchain"]["triton"], "toolchain.triton"),
            config_keys=tuple(raw["config_keys"]),
            files=tuple(raw["files"]),
            raw=raw,
        )
    except (KeyError, TypeError) as exc:
        raise KernelPackageError(f"{source}: manifest field missing or malformed: {exc}") from None
    for entry in m.files:
        if not isinstance(entry, dict) or not {"path", "sha256", "lands_at"} <= set(entry):
            raise KernelPackageError(f"{source}: files entry {entry!r} lacks path/sha256/lands_at")
    return m


def _str(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{field} must be a non-empty string")
    return value


def compatibility_problems(m: Manifest, runtime: TargetRuntime) -> list[str]:
    """Why this package cannot serve on a target running `runtime` (empty when it can)."""
    problems = []
    if m.arch != runtime.arch:
        problems.append(f"package targets {m.arch}, the target runs {runtime.arch}")
    if m.triton != runtime.triton:
        problems.append(
            f"package was built for triton {m.triton}, the target runs triton {runtime.triton} "
            f"(SGLang looks up configs/triton_{runtime.triton.replace('.', '_')}/ only)"
        )
    unknown = [d for d in runtime.device_names if d not in m.device_names]
    if unknown:
        problems.append(
            f"target GPU {unknown[0]} is not among the package's {list(m.device_names)}"
        )
    return problems


def check_compatible(m: Manifest, runtime: TargetRuntime) -> None:
    """Raise KernelPackageError listing every incompatibility."""
    problems = compatibility_problems(m, runtime)
    if problems:
        raise KernelPackageError(
            f"{m.ref} is not compatible with the target ({runtime.source}): " + "; ".join(problems)
        )
