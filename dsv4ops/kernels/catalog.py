"""The tuned configs shipped in kernels/: where they are, what they hold, where they land.

Config files use SGLang's fused-MoE JSON layout: `{"<batch size M>": {launch params}}`, looked up
by the nearest M (fused_moe_triton_config.py). MoE files keep SGLang's exact names and land in
`configs/triton_X_Y_Z/` of the package root, which is what SGLANG_MOE_CONFIG_DIR points at.
Attention files use the same schema with a `kernel=...` name and land in `attention_configs/`.

FP4-expert MoE files (kernels/moe_nvfp4.py, kernels/moe_mxfp4.py) also use SGLang's schema, but
SGLang's Triton fused-MoE has no FP4 `dtype=` (its names cover fp8_w8a8, int8_w8a8, int8_w8a16,
int4_w4a16, ...; FP4 experts run on flashinfer_mxfp4 / flashinfer_trtllm_routed, reference §2.1),
so it would never read them. They carry the package's own key, SGLang's fields behind a
`kernel=` prefix:

    kernel=fused_moe,E=256,N=512,device_name=<dev>,dtype=nvfp4_w4a16[_down].json   W4A16, checked
    kernel=fused_moe,E=256,N=512,device_name=<dev>,dtype=nvfp4_w4a4[_down].json    tl.dot_scaled
    kernel=fused_moe,E=256,N=512,device_name=<dev>,dtype=mxfp4_w4a16[_down].json   W4A16, checked
    kernel=fused_moe,E=256,N=512,device_name=<dev>,dtype=mxfp4_w4a4[_down].json    tl.dot_scaled

and land in `moe_fp4_configs/triton_X_Y_Z/`, outside SGLANG_MOE_CONFIG_DIR's `configs/`. The
W4A4 `tl.dot_scaled` kernels are AOT-compiled only (AOT_ONLY, reasons in AOT_ONLY_WHY): Triton's
interpreter computes NVFP4 dot_scaled wrongly and 3.7.1's cannot run dot_scaled at all
(reference §3.5, gotcha 6).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dsv4ops.errors import KernelPackageError

MOE_KEYS = (
    "BLOCK_SIZE_M",
    "BLOCK_SIZE_N",
    "BLOCK_SIZE_K",
    "GROUP_SIZE_M",
    "num_warps",
    "num_stages",
)
ATTN_KEYS = ("BLOCK_H", "BLOCK_T", "num_warps", "num_stages")
CONFIG_TREES = ("configs", "attention_configs", "moe_fp4_configs")
# dtype= of the package's FP4 MoE config names -> kernel family (kernels/moe_nvfp4.py, moe_mxfp4.py).
FP4_DTYPES = {
    "nvfp4_w4a16": "fused_moe_nvfp4",
    "nvfp4_w4a4": "fused_moe_nvfp4_w4a4",
    "mxfp4_w4a16": "fused_moe_mxfp4",
    "mxfp4_w4a4": "fused_moe_mxfp4_w4a4",
}
_NVFP4_DOT_SCALED = (
    "Triton's interpreter computes NVFP4 tl.dot_scaled wrongly (reference §3.5 gotcha 6: "
    "it reads the ue4m3 scale bits as e8m0 exponents)"
)
_MXFP4_DOT_SCALED = (
    "Triton 3.7.1's interpreter cannot run tl.dot_scaled at all (reference §3.5 gotcha 6: "
    "AttributeError inside the interpreter)"
)
# Kernels the interpreter cannot check, and why: sm_120 AOT compile only, until a GPU run
# compares them with their W4A16 kernels (fused_moe_nvfp4 / fused_moe_mxfp4).
AOT_ONLY_WHY = {
    f"{family}_{proj}": why
    for family, why in (
        ("fused_moe_nvfp4_w4a4", _NVFP4_DOT_SCALED),
        ("fused_moe_mxfp4_w4a4", _MXFP4_DOT_SCALED),
    )
    for proj in ("up", "down")
}
AOT_ONLY = frozenset(AOT_ONLY_WHY)
# Kernels with one launch config for every batch size, kept in their source module (no config
# file: the grid grows with the tokens, the tile stays). The sm_120 AOT check compiles them like
# a shipped config; tests/kernels/catalog_test.py holds each equal to its module's CONFIG (this
# module cannot import the sources: they import triton).
FIXED_CONFIGS: dict[str, dict[str, int]] = {
    "flash_mla_paged": {"BLOCK_H": 16, "BLOCK_T": 16, "num_warps": 8, "num_stages": 2},
}
# Fixed-config kernels whose correctness is checked outside the build's interpreter run, and where:
# the reference they are held to is SGLang's own, from the pinned wheel, not a dsv4ops one.
CHECKED_ELSEWHERE = {
    "flash_mla_paged": "tests/kernels/flash_mla_paged_test.py, under Triton's interpreter against "
    "SGLang 0.5.23's _sm120_sparse_decode_fwd (flash_mla_sm120.py L136) and its Triton fallback",
}


@dataclass(frozen=True)
class ConfigFile:
    """One shipped config file. `lands_at` is relative to the package root."""

    path: Path
    lands_at: str
    kernel: str  # fused_moe[_{nvfp4,mxfp4}[_w4a4]]_{up,down} | sparse_decode_attn
    table: dict[int, dict[str, int]]

    @property
    def config_key(self) -> str:
        """The key a consumer looks the file up by: its name without `.json`."""
        return self.path.stem


def kernels_dir() -> Path:
    """The kernel source tree: $DSV4OPS_KERNELS_DIR, else the package data `dsv4ops.kernels.sources`.

    Package data, not a folder next to a checkout: an installed dsv4ops (`pip install .`) builds
    from any directory. importlib.resources gives a real directory for every install that puts
    packages on the file system (a zipped install is not supported: Triton reads the sources).
    """
    env = os.environ.get("DSV4OPS_KERNELS_DIR")
    if env:
        return Path(env)
    return Path(str(resources.files("dsv4ops.kernels.sources")))


def kernel_of(name: str) -> str:
    if name.startswith("kernel=sparse_decode_attn"):
        return "sparse_decode_attn"
    if name.startswith("kernel=fused_moe,"):
        stem = name.removesuffix(".json").removesuffix("_down")
        fields = dict(f.split("=", 1) for f in stem.split(",") if "=" in f)
        family = FP4_DTYPES.get(fields.get("dtype", ""))
        if family is None:
            raise KernelPackageError(
                f"{name}: dtype={fields.get('dtype')!r} is not one of {sorted(FP4_DTYPES)}"
            )
        return f"{family}_{'down' if name.endswith('_down.json') else 'up'}"
    if name.startswith("E="):
        return "fused_moe_down" if name.endswith("_down.json") else "fused_moe_up"
    raise KernelPackageError(f"{name}: not a known config file name (E=... or kernel=...)")


def load_table(path: Path, kernel: str) -> dict[int, dict[str, int]]:
    """Parse and validate one config file; raises KernelPackageError naming file and key."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KernelPackageError(f"{path}: not readable JSON: {exc}") from None
    if not isinstance(raw, dict) or not raw:
        raise KernelPackageError(f"{path}: expected a non-empty object of batch size -> config")
    want = ATTN_KEYS if kernel == "sparse_decode_attn" else MOE_KEYS
    table: dict[int, dict[str, int]] = {}
    for key, cfg in raw.items():
        if not key.isdigit() or int(key) < 1:
            raise KernelPackageError(f"{path}: key {key!r}: batch sizes must be positive integers")
        if not isinstance(cfg, dict) or set(cfg) != set(want):
            raise KernelPackageError(f"{path}: key {key!r}: expected exactly {', '.join(want)}")
        for field, value in cfg.items():
            if not isinstance(value, int) or value < 1:
                raise KernelPackageError(f"{path}: key {key!r}.{field}: must be a positive integer")
        table[int(key)] = dict(cfg)
    return table


def shipped_configs(root: Path | None = None) -> list[ConfigFile]:
    """Every config file under kernels/configs and kernels/attention_configs, validated."""
    root = root or kernels_dir()
    files = []
    for tree in CONFIG_TREES:
        for path in sorted((root / tree).glob("triton_*/*.json")):
            kernel = kernel_of(path.name)
            lands_at = path.relative_to(root).as_posix()
            files.append(ConfigFile(path, lands_at, kernel, load_table(path, kernel)))
    if not files:
        raise KernelPackageError(
            f"{root}: no config files under {' or '.join(CONFIG_TREES)}/triton_*/"
        )
    return files


def fixed_jobs() -> list[tuple[str, dict[str, int]]]:
    """(kernel, config) of every fixed-config kernel, for the sm_120 compile check."""
    return [(kernel, dict(cfg)) for kernel, cfg in sorted(FIXED_CONFIGS.items())]


def interpreter_jobs(jobs: list[tuple[str, dict[str, int]]]) -> list[tuple[str, dict[str, int]]]:
    """The jobs the build's interpreter run checks (all but AOT_ONLY and CHECKED_ELSEWHERE)."""
    return [j for j in jobs if j[0] not in AOT_ONLY and j[0] not in CHECKED_ELSEWHERE]


def nearest(table: dict[int, dict[str, int]], m: int) -> dict[str, int]:
    """SGLang's choice: the config whose batch-size key is closest to m (ties: the smaller)."""
    return table[min(sorted(table), key=lambda k: abs(k - m))]


def missing_buckets(
    table: dict[int, dict[str, int]], buckets: list[int] | tuple[int, ...]
) -> list[int]:
    """Buckets with no exact key: they would run on a neighbour's config."""
    return [b for b in buckets if b not in table]
