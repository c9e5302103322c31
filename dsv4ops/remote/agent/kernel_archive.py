"""The kernel-package archive rules, in one place: `dsv4ops kernels verify` (operator side,
`dsv4ops/kernels/deploy.py`) and the agent's `kernels_install` on the target both use them.

A package is a .tar.gz holding one top directory `<name>-<version>/` of plain files and
directories, with a `manifest.json` listing every file with its sha256. Stdlib only: it ships
in the agent zip.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile

from dsv4ops.jsontypes import JSONObject

# A decoded manifest.json (kept local: the operator side imports this module on its own).
Manifest = JSONObject

MANIFEST = "manifest.json"
# A package is tens of KB (Triton sources, tuned configs, a manifest: 29 KB packed, 200 KB
# unpacked in 0.3.0). The bounds refuse a wrong file or a decompression bomb before it is held in
# memory, on the operator's machine and on the box, whose serving processes share its RAM.
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
MAX_UNPACKED_BYTES = 256 * 1024 * 1024


class PackageError(Exception):
    """The archive or the request is refused; the message is for the operator."""


def read_safe(data: bytes) -> tuple[str, dict[str, bytes]]:
    """(top directory, {relative path: bytes}) of a .tar.gz, refusing anything but plain files
    and directories inside one top directory: absolute names, `..`, links and devices; an
    archive over MAX_ARCHIVE_BYTES, or whose files add up to more than MAX_UNPACKED_BYTES."""
    archive, members = _open_bounded(data)
    top, files = None, {}
    for m in members:
        name = m.name
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "\\" in name or not name:
            raise PackageError(f"archive entry {name!r} escapes the package directory")
        if m.issym() or m.islnk():
            raise PackageError(
                f"archive entry {name!r} is a link ({'symlink' if m.issym() else 'hardlink'}"
                f" to {m.linkname!r}); packages hold plain files only"
            )
        if not (m.isfile() or m.isdir()):
            raise PackageError(f"archive entry {name!r} is not a regular file or directory")
        if top is None:
            top = parts[0]
        if parts[0] != top:
            raise PackageError(f"archive entry {name!r} is outside the top directory {top!r}")
        if m.isfile():
            if len(parts) < 2:
                raise PackageError(f"archive entry {name!r} is outside the top directory")
            extracted = archive.extractfile(m)
            files["/".join(parts[1:])] = extracted.read() if extracted else b""
    if top is None or MANIFEST not in files:
        raise PackageError(f"archive has no {MANIFEST} in its top directory")
    return top, files


def _open_bounded(data: bytes) -> tuple[tarfile.TarFile, list[tarfile.TarInfo]]:
    """The archive and its members' headers, within the bounds (nothing extracted yet)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise PackageError(f"the archive is over {MAX_ARCHIVE_BYTES} bytes: not a kernel package")
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115 - in memory
        members = archive.getmembers()  # headers only: each file's bytes are skipped, not held
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PackageError(f"not a readable .tar.gz archive: {exc}") from None
    unpacked = sum(m.size for m in members if m.isfile())
    if unpacked > MAX_UNPACKED_BYTES:
        raise PackageError(
            f"the archive's files add up to {unpacked} bytes, over {MAX_UNPACKED_BYTES}: "
            "not a kernel package"
        )
    return archive, members


def verify_members(files: dict[str, bytes]) -> Manifest:
    """Parse the manifest and check every file against it; return the manifest dict.

    Refuses a checksum or size mismatch, a listed file that is missing and a file not listed."""
    try:
        manifest = json.loads(files[MANIFEST].decode("utf-8"))
        listed = {e["path"]: e for e in manifest["files"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise PackageError(f"{MANIFEST} is not a valid manifest: {exc}") from None
    for path, entry in sorted(listed.items()):
        if path not in files:
            raise PackageError(f"{path}: listed in the manifest but missing from the archive")
        digest = hashlib.sha256(files[path]).hexdigest()
        if digest != entry.get("sha256"):
            raise PackageError(
                f"{path}: checksum mismatch (manifest {str(entry.get('sha256'))[:12]}…, "
                f"file {digest[:12]}…): the package was modified after it was built"
            )
    extra = sorted(set(files) - set(listed) - {MANIFEST})
    if extra:
        raise PackageError(f"{extra[0]}: in the archive but not in the manifest")
    assert isinstance(manifest, dict)  # manifest["files"] above fails on any other JSON value
    return manifest


def check_target(manifest: Manifest, arch: str | None, triton: str | None) -> None:
    """Refuse a manifest built for another architecture or Triton version."""
    got_arch = manifest.get("target", {}).get("arch")
    got_triton = manifest.get("toolchain", {}).get("triton")
    if arch and got_arch != arch:
        raise PackageError(f"package targets {got_arch}, the target runs {arch}")
    if triton and got_triton != triton:
        raise PackageError(
            f"package was built for triton {got_triton}, the target runs triton {triton}"
            f" (SGLang looks configs up under configs/triton_{triton.replace('.', '_')}/)"
        )


def verify_tree(root: str) -> Manifest:
    """Re-check an unpacked package directory against its manifest."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            path = os.path.join(dirpath, n)
            if os.path.islink(path):
                raise PackageError(f"{path}: is a link")
            with open(path, "rb") as f:
                files[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    if MANIFEST not in files:
        raise PackageError(f"{root}: no {MANIFEST}")
    return verify_members(files)
