"""Kernel-package tool that runs ON THE TARGET (stdlib only; sent as `python -c SOURCE ARGS`).

The operator side imports the same checks (`read_safe`, `verify_members`) for `kernels verify`, so
the archive rules exist once. Target layout under the work directory:

    kernels/<name>/<version>/          unpacked, checksums verified (SGLANG_MOE_CONFIG_DIR)
    kernels/<name>/current -> <version> switched by symlink rename (atomic)
    state/kernels.json                 {"packages": {name: {"current", "previous", "config_dir"}},
                                        "env": {"SGLANG_MOE_CONFIG_DIR": path of the current one}}

Every refusal happens before anything under kernels/<name>/ changes; the upload and the staging
directory are removed whatever happens. Output: one JSON object on stdout; errors exit 2 with
{"error": message}.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import uuid

MANIFEST = "manifest.json"


class PackageError(Exception):
    """The archive or the request is refused; the message is for the operator."""


def read_safe(data: bytes) -> tuple[str, dict[str, bytes]]:
    """(top directory, {relative path: bytes}) of a .tar.gz, refusing anything but plain files
    and directories inside one top directory: absolute names, `..`, links and devices."""
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")  # noqa: SIM115 - in memory
        members = archive.getmembers()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PackageError(f"not a readable .tar.gz archive: {exc}") from None
    top, files = None, {}
    for m in members:
        name = m.name
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "\\" in name or not name:
            raise PackageError(f"archive entry {name!r} escapes the package directory")
        if m.issym() or m.islnk():
            raise PackageError(f"archive entry {name!r} is a link ({'symlink' if m.issym() else 'hardlink'}"
                               f" to {m.linkname!r}); packages hold plain files only")
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


def verify_members(files: dict[str, bytes]) -> dict:
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
            raise PackageError(f"{path}: checksum mismatch (manifest {str(entry.get('sha256'))[:12]}…, "
                               f"file {digest[:12]}…): the package was modified after it was built")
    extra = sorted(set(files) - set(listed) - {MANIFEST})
    if extra:
        raise PackageError(f"{extra[0]}: in the archive but not in the manifest")
    return manifest


def check_target(manifest: dict, arch: str | None, triton: str | None) -> None:
    """Refuse a manifest built for another architecture or Triton version."""
    got_arch = manifest.get("target", {}).get("arch")
    got_triton = manifest.get("toolchain", {}).get("triton")
    if arch and got_arch != arch:
        raise PackageError(f"package targets {got_arch}, the target runs {arch}")
    if triton and got_triton != triton:
        raise PackageError(f"package was built for triton {got_triton}, the target runs triton {triton}"
                           f" (SGLang looks configs up under configs/triton_{triton.replace('.', '_')}/)")


# ----------------------------------------------------------------------------- target layout

def _plain_name(part: str) -> bool:
    """A package name or version usable as one directory entry next to `current`."""
    return bool(part) and "/" not in part and not part.startswith(".") and part != "current"


def _pkg_dir(workdir: str, name: str) -> str:
    if not _plain_name(name):
        raise PackageError(f"bad package name {name!r}")
    return os.path.join(workdir, "kernels", name)


def _write_json_atomic(path: str, data: object) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _state_path(workdir: str) -> str:
    return os.path.join(workdir, "state", "kernels.json")


def _read_state(workdir: str) -> dict:
    try:
        with open(_state_path(workdir)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"packages": {}, "env": {}}


def _switch(workdir: str, name: str, version: str) -> dict:
    """Point current at version (symlink + rename, atomic); record it and the previous one."""
    pdir = _pkg_dir(workdir, name)
    current = os.path.join(pdir, "current")
    previous = os.readlink(current) if os.path.islink(current) else None
    tmp_link = os.path.join(pdir, f".current.{uuid.uuid4().hex[:8]}")
    os.symlink(version, tmp_link)
    os.replace(tmp_link, current)
    state = _read_state(workdir)
    config_dir = os.path.join(pdir, version)
    entry = {"current": version, "previous": previous if previous != version else
             state.get("packages", {}).get(name, {}).get("previous"), "config_dir": config_dir}
    state.setdefault("packages", {})[name] = entry
    state["env"] = {"SGLANG_MOE_CONFIG_DIR": config_dir}
    _write_json_atomic(_state_path(workdir), state)
    return entry


def install(workdir: str, upload: str, arch: str | None, triton: str | None) -> dict:
    """Verify the uploaded archive, unpack it to kernels/<name>/<version>, switch current."""
    staging = None
    try:
        with open(upload, "rb") as f:
            top, files = read_safe(f.read())
        manifest = verify_members(files)
        check_target(manifest, arch, triton)
        name, version = str(manifest["name"]), str(manifest["version"])
        if top != f"{name}-{version}" or not _plain_name(version):
            raise PackageError(f"archive top directory {top!r} does not match {name}-{version}")
        pdir = _pkg_dir(workdir, name)
        final = os.path.join(pdir, version)
        if os.path.isdir(final):
            verify_tree(final)  # same version again: only switch, after proving it intact
        else:
            os.makedirs(pdir, exist_ok=True)
            staging = os.path.join(pdir, f".staging-{uuid.uuid4().hex[:8]}")
            for rel, data in files.items():
                path = os.path.join(staging, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as out:
                    out.write(data)
            verify_tree(staging)  # what landed on disk, not what we meant to write
            os.rename(staging, final)
            staging = None
        return {"name": name, "version": version, **_switch(workdir, name, version)}
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        if os.path.exists(upload):
            os.remove(upload)


def verify_tree(root: str) -> dict:
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


def list_packages(workdir: str) -> dict:
    state = _read_state(workdir)
    out = {}
    base = os.path.join(workdir, "kernels")
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        pdir = os.path.join(base, name)
        if name.startswith(".") or not os.path.isdir(pdir):
            continue
        versions = sorted(v for v in os.listdir(pdir) if not v.startswith(".") and v != "current"
                          and os.path.isdir(os.path.join(pdir, v)))
        current = os.readlink(os.path.join(pdir, "current")) if os.path.islink(
            os.path.join(pdir, "current")) else None
        out[name] = {"versions": versions, "current": current,
                     "previous": state.get("packages", {}).get(name, {}).get("previous")}
    return {"packages": out, "env": state.get("env", {})}


def rollback(workdir: str, name: str, to: str | None) -> dict:
    entry = _read_state(workdir).get("packages", {}).get(name)
    target = to or (entry or {}).get("previous")
    if not target:
        raise PackageError(f"{name}: no previous version to roll back to")
    if not _plain_name(target):
        raise PackageError(f"{name}: bad version {target!r}")
    if not os.path.isdir(os.path.join(_pkg_dir(workdir, name), target)):
        raise PackageError(f"{name}: version {target} is not installed on the target")
    verify_tree(os.path.join(_pkg_dir(workdir, name), target))
    return {"name": name, "version": target, **_switch(workdir, name, target)}


def present(workdir: str, name: str, version: str) -> dict:
    path = os.path.join(_pkg_dir(workdir, name), version)
    try:
        verify_tree(path) if os.path.isdir(path) else None
    except PackageError as exc:
        return {"present": False, "reason": str(exc)}
    return {"present": os.path.isdir(path), "path": path}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pkgtool")
    parser.add_argument("op", choices=["install", "list", "rollback", "present"])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--upload")
    parser.add_argument("--arch")
    parser.add_argument("--triton")
    parser.add_argument("--name")
    parser.add_argument("--version")
    a = parser.parse_args(argv)
    try:
        if a.op == "install":
            result = install(a.workdir, a.upload, a.arch, a.triton)
        elif a.op == "list":
            result = list_packages(a.workdir)
        elif a.op == "rollback":
            result = rollback(a.workdir, a.name, a.version)
        else:
            result = present(a.workdir, a.name, a.version)
    except (PackageError, OSError) as exc:
        sys.stdout.write(json.dumps({"error": str(exc)}) + "\n")
        return 2
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
