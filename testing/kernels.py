"""Test helpers and doubles for `dsv4ops.kernels` (one module per package area).

- artifacts: Helpers for the kernel-package tests: hand-made and tampered artifacts, target tree snapshots.
- SGLang's own sm_120 decode attention loaded from the pinned wheel, and caches in its layout.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import shutil
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, TypedDict
from unittest import mock

import pytest

from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels import aot
from dsv4ops.kernels.build import BuildResult, build
from dsv4ops.kernels.catalog import kernels_dir, shipped_configs
from dsv4ops.remote.local import LocalExecutor

if TYPE_CHECKING:
    import torch

# --- artifacts (was testing/kernels.py) ---


def read_members(path: Path) -> tuple[str, dict[str, bytes]]:
    """(top dir, {relative path: bytes}) of an artifact, without any safety checks."""
    with tarfile.open(path, "r:gz") as tar:
        members = {m.name: _read(tar, m) for m in tar.getmembers() if m.isfile()}
    top = next(iter(members)).split("/")[0]
    return top, {k.split("/", 1)[1]: v for k, v in members.items()}


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    f = tar.extractfile(member)
    assert f is not None, member.name  # a regular file always has content
    return f.read()


def write_tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def repack(
    src: Path,
    dst: Path,
    mutate: Callable[[dict[str, bytes]], None],
    top: str | None = None,
    fix_manifest: bool = False,
) -> Path:
    """Copy an artifact with its files changed by `mutate`; `fix_manifest` re-signs checksums
    (a well-formed package with a different content, e.g. another target)."""
    old_top, files = read_members(src)
    mutate(files)
    if fix_manifest:
        manifest = json.loads(files["manifest.json"])
        for entry in manifest["files"]:
            entry["sha256"] = hashlib.sha256(files[entry["path"]]).hexdigest()
        files["manifest.json"] = json.dumps(manifest).encode()
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = []
    for rel, data in sorted(files.items()):
        entries.append((tarfile.TarInfo(f"{top or old_top}/{rel}"), data))
    return write_tar(dst, entries)


def edit_manifest(files: dict[str, bytes], change: Callable[[JSONObject], None]) -> None:
    manifest = json.loads(files["manifest.json"])
    change(manifest)
    files["manifest.json"] = json.dumps(manifest).encode()


def snapshot(root: Path) -> dict[str, str]:
    """Every path under root -> content digest / link target / 'dir' (what 'unchanged' means)."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "->" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@dataclass(frozen=True)
class Built:
    v1: BuildResult  # built with the interpreter check
    v2: BuildResult  # same kernels, another version


@dataclass(frozen=True)
class ShippedAot:
    """The sm_120 compile of every shipped (kernel, config), run once with an empty cache."""

    version: str  # the Triton that compiled them
    results: list[aot.AotResult]
    cache: Path  # the aot-cache/ that compile filled (content-hash keyed)


def compile_shipped(state: Path) -> ShippedAot:
    """Compile every shipped config for sm_120 into `state`/aot-cache, from nothing (a real,
    cold compile: `state` must be empty). Tests that build the shipped package copy the cache
    (`seed_aot_cache`) instead of compiling the same sources again; the keys hash the kernel
    sources, worker, config and Triton version, so a hit is exactly what a compile would give."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSV4OPS_STATE_DIR", str(state))
        assert not aot.cache_dir().exists(), "the shipped compile must start from an empty cache"
        with LocalExecutor() as ex:
            version, results = aot.check(
                aot.jobs_for(shipped_configs()), executor=ex, kernels_root=kernels_dir()
            )
        return ShippedAot(version, results, aot.cache_dir())


def seed_aot_cache(shipped: ShippedAot, state: Path) -> None:
    """Copy the session's shipped compile results into `state`/aot-cache (kept if already there)."""
    shutil.copytree(shipped.cache, state / "aot-cache", dirs_exist_ok=True)


def build_pair(out: Path, state: Path) -> Built:
    """Two real artifacts into `out`: v1 checked with Triton's interpreter, v2 another version.
    Operator state (the compile caches) goes to `state`, never the working directory."""
    from dsv4ops.kernels.interpreter import enable as enable_interpreter

    # TRITON_INTERPRET is read when @triton.jit decorates: on before the build imports a kernel
    # (reference gotcha 2). Without the kernels extra there is nothing to turn on.
    with contextlib.suppress(ImportError):
        enable_interpreter()
    with pytest.MonkeyPatch.context() as mp, LocalExecutor() as ex:
        mp.setenv("DSV4OPS_STATE_DIR", str(state))
        v1 = build(executor=ex, out_dir=out, version="0.1.0")
        v2 = build(executor=ex, out_dir=out, version="0.2.0", interpreter=False)
    return Built(v1, v2)


# --- SGLang's own sm_120 decode attention, from the pinned wheel ---

FLASH_MLA = "kernels/ops/attention/flash_mla_sm120.py"
FLASH_MLA_TRITON = "kernels/ops/attention/flash_mla_sm120_triton.py"


def sglang_flash_mla(dest: Path, backend: str = "torch") -> ModuleType:
    """SGLang 0.5.23's flash_mla_sm120.py, imported from the file the pinned wheel holds
    (unpacked into `dest`: Triton reads a kernel's source from its file), unmodified.

    Stand-ins only for its two platform imports, which pull in SGLang's whole runtime: the
    backend switch `envs.SGLANG_SM120_FLASHMLA_BACKEND` (`backend`: "torch" runs
    `_sm120_sparse_decode_fwd`, "triton" SGLang's Triton fallback) and `is_hip()` (False: the
    box is CUDA). The Triton fallback's module (only torch and triton) is `.TRITON_FALLBACK`:
    call its `flash_mla_sparse_decode_triton` directly (the entry point imports it at call time,
    L344, after the stand-ins are gone)."""
    import torch  # noqa: F401  (imported before the stand-ins: patch.dict drops what it adds)
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    from tools.sglang_wheel import source

    with mock.patch.dict(sys.modules, _stand_ins(backend)):
        triton_fallback = _load(dest, FLASH_MLA_TRITON, source(FLASH_MLA_TRITON))
        module = _load(dest, FLASH_MLA, source(FLASH_MLA))
    # Its autotuner times 3 configs on a GPU (none here): pinned to its first, BLOCK_T=16. The
    # configs change only the tiling, not what the kernel computes.
    tuner = triton_fallback._tiled_sparse_decode_kernel
    tuner.configs = tuner.configs[:1]
    module.TRITON_FALLBACK = triton_fallback  # type: ignore[attr-defined]
    return module


def _stand_ins(backend: str) -> dict[str, ModuleType]:
    switch = SimpleNamespace(get=lambda: backend)
    return {
        "sglang": _package("sglang"),
        "sglang.srt": _package("sglang.srt"),
        "sglang.srt.environ": _module("sglang.srt.environ", envs=SimpleNamespace(
            SGLANG_SM120_FLASHMLA_BACKEND=switch)),
        "sglang.srt.utils": _module("sglang.srt.utils", is_hip=lambda: False),
        "sglang.srt.plugins": _package("sglang.srt.plugins"),
        "sglang.kernels": _package("sglang.kernels"),
        "sglang.kernels.ops": _package("sglang.kernels.ops"),
        "sglang.kernels.ops.attention": _package("sglang.kernels.ops.attention"),
    }  # fmt: skip


# --- SGLang's own MXFP4 dequantizer and naive MoE, from the pinned wheel ---

MXFP4_TENSOR = "srt/layers/quantization/mxfp4_tensor.py"
CPU_TEST_UTILS = "test/cpu_test_utils.py"


def sglang_mxfp4(dest: Path) -> tuple[ModuleType, ModuleType]:
    """SGLang 0.5.23's plain-torch MXFP4 path, unmodified from the pinned wheel (both import only
    torch): `MXFP4QuantizeUtil.dequantize` (mxfp4_tensor.py L77) and the naive routed MoE its CPU
    kernel tests hold `fused_experts_cpu` to, `torch_naive_fused_moe` (cpu_test_utils.py L212).
    Returns (mxfp4_tensor, cpu_test_utils)."""
    from tools.sglang_wheel import source

    return (
        _load(dest, MXFP4_TENSOR, source(MXFP4_TENSOR)),
        _load(dest, CPU_TEST_UTILS, source(CPU_TEST_UTILS)),
    )


@contextlib.contextmanager
def sglang_registry(dest: Path, flash_mla: ModuleType) -> Iterator[ModuleType]:
    """SGLang's own hook registry (srt/plugins/hook_registry.py from the pinned wheel; stdlib
    only), importable as a plugin imports it, with `flash_mla` (sglang_flash_mla's) as
    sglang.kernels.ops.attention.flash_mla_sm120 for its REPLACE to patch. Yields the registry
    module; sys.modules is as before afterwards."""
    from tools.sglang_wheel import source

    rel = "srt/plugins/hook_registry.py"
    with mock.patch.dict(sys.modules, _stand_ins("torch")):
        registry = _load(dest, rel, source(rel))
        sys.modules[registry.__name__] = registry
        sys.modules[flash_mla.__name__] = flash_mla
        yield registry


def _package(name: str) -> ModuleType:
    pkg = ModuleType(name)
    pkg.__path__ = []
    return pkg


def _module(name: str, **attrs: object) -> ModuleType:
    mod = ModuleType(name)
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def _load(dest: Path, rel: str, text: str) -> ModuleType:
    path = dest / "sglang" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    name = "sglang." + rel.removesuffix(".py").replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Case:
    """One decode attention call's shape."""

    tokens: int
    heads: int
    topk: int
    extra_topk: int  # 0: no extra cache
    sink: bool
    lengths: bool = True  # topk_length / extra_topk_length given
    s_q: int = 1
    q_scale: float = 0.5  # larger: sharper softmax


class Kwargs(TypedDict, total=False):
    """What deepseek_v4_backend.py L4350-4361 passes to flash_mla_with_kvcache_sm120."""

    q: torch.Tensor
    k_cache: torch.Tensor
    indices: torch.Tensor
    topk_length: torch.Tensor | None
    attn_sink: torch.Tensor | None
    head_dim_v: int
    softmax_scale: float
    extra_k_cache: torch.Tensor
    extra_indices_in_kvcache: torch.Tensor
    extra_topk_length: torch.Tensor | None


def decode_kwargs(case: Case, seed: int) -> Kwargs:
    """Seeded arguments for flash_mla_with_kvcache_sm120: caches in the V4 layout, about 20% -1
    indices, ragged lengths (main >= 1, extra >= 0), the sink as SGLang passes it (fp32 [H])."""
    import torch

    g = torch.Generator().manual_seed(seed)
    b, s = case.tokens, case.s_q
    cache = paged_cache(g, 3, 256)  # page 256, as the SWA pool
    kw: Kwargs = {
        "q": (torch.randn(b, s, case.heads, 512, generator=g) * case.q_scale).to(torch.bfloat16),
        "k_cache": cache,
        "indices": _indices(g, b, s, case.topk, 3 * 256),
        "topk_length": _lengths(g, b, case.topk, low=1) if case.lengths else None,
        "attn_sink": torch.randn(case.heads, generator=g) * 2 if case.sink else None,
        "head_dim_v": 512,
        "softmax_scale": 512**-0.5,
    }
    if case.extra_topk:
        kw["extra_k_cache"] = paged_cache(g, 4, 64)  # another page size: read from its view
        kw["extra_indices_in_kvcache"] = _indices(g, b, s, case.extra_topk, 4 * 64)
        kw["extra_topk_length"] = _lengths(g, b, case.extra_topk, low=0) if case.lengths else None
    return kw


def _indices(g: torch.Generator, b: int, s: int, topk: int, n: int) -> torch.Tensor:
    import torch

    idx: torch.Tensor = torch.randint(0, n, (b, s, topk), generator=g, dtype=torch.int32)
    idx[..., 0] = n - 1  # the last slot of the last page: the end of the view
    idx[torch.rand(idx.shape, generator=g) < 0.2] = -1
    return idx


def _lengths(g: torch.Generator, b: int, topk: int, low: int) -> torch.Tensor:
    import torch

    lengths: torch.Tensor = torch.randint(low, topk + 1, (b,), generator=g, dtype=torch.int32)
    return lengths


def paged_cache(g: torch.Generator, pages: int, page_size: int) -> torch.Tensor:
    """A random DSV4 KV cache in SGLang's V4 layout, viewed as the backend views it.

    The pool is `(pages, page_bytes)` uint8, page_bytes = ceil(page_size * 584 / 576) * 576
    (deepseek_v4_memory_pool.py L310-326); token t of a page: 448 FP8 nope bytes at t*576, 64
    bf16 rope values at t*576 + 448, 7 UE8M0 scales (+1 pad) in the footer at page_size*576 +
    t*8. Unwritten bytes (the pad, the page's tail) are random too: a read at a wrong offset
    shows. The returned view is deepseek_v4_backend.py L4189's: (pages, page_size, 1, 584)."""
    import torch

    page_bytes = -(-page_size * 584 // 576) * 576
    raw = torch.randint(0, 256, (pages, page_bytes), generator=g, dtype=torch.uint8)
    data = raw[:, : page_size * 576].view(pages, page_size, 576)
    nope = (torch.randn(pages, page_size, 448, generator=g) * 2).to(torch.float8_e4m3fn)
    data[..., :448] = nope.view(torch.uint8)
    rope = torch.randn(pages, page_size, 64, generator=g).to(torch.bfloat16)
    data[..., 448:] = rope.view(torch.uint8)
    footer = raw[:, page_size * 576 : page_size * 584].view(pages, page_size, 8)
    # Scales 2**-6 .. 2**2: what a real quantizer writes for activations of this size.
    footer[..., :7] = torch.randint(121, 130, (pages, page_size, 7), generator=g).to(torch.uint8)
    return raw[:, : page_size * 584].view(pages, page_size, 1, 584).view(torch.float8_e4m3fn)
