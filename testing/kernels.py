"""Test helpers and doubles for `dsv4ops.kernels` (one module per package area).

- artifacts: Helpers for the kernel-package tests: hand-made and tampered artifacts, target tree snapshots.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels import aot
from dsv4ops.kernels.build import BuildResult, build
from dsv4ops.kernels.catalog import kernels_dir, shipped_configs
from dsv4ops.remote.local import LocalExecutor

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
