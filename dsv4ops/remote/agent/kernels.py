"""Kernel packages on the target: install (verify, unpack, switch), switch back, list, present,
and the runtime probe (triton version, GPUs) a deploy checks compatibility against.

Layout under the work directory:

    kernels/<name>/<version>/          unpacked, checksums verified (SGLANG_MOE_CONFIG_DIR)
    kernels/<name>/current -> <version> switched by symlink rename (atomic)
    state/kernels.json                 {"packages": {name: {"current", "previous", "config_dir"}},
                                        "env": the current one's manifest env, resolved:
                                               SGLANG_MOE_CONFIG_DIR, SGLANG_PLUGINS, PYTHONPATH}

Every refusal happens before anything under kernels/<name>/ changes; the upload and the staging
directory are removed whatever happens. Refusals are AgentError kind "package".
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable

from .common import AgentError, JsonObject, Workdir, read_json, write_json_atomic
from .kernel_archive import (
    MAX_ARCHIVE_BYTES,
    PackageError,
    check_target,
    read_safe,
    verify_members,
    verify_tree,
)

STATE = "kernels"  # <workdir>/state/kernels.json


def _plain_name(part: str) -> bool:
    """A package name or version usable as one directory entry next to `current`."""
    return bool(part) and "/" not in part and not part.startswith(".") and part != "current"


def _pkg_dir(wd: Workdir, name: str) -> str:
    if not isinstance(name, str) or not _plain_name(name):
        raise PackageError(f"bad package name {name!r}")
    return os.path.join(wd.root, "kernels", name)


def _read_state(wd: Workdir) -> JsonObject:
    return read_json(wd.state(STATE)) or {"packages": {}, "env": {}}


def _switch(wd: Workdir, name: str, version: str) -> JsonObject:
    """Point current at version (symlink + rename, atomic); record it and the previous one."""
    pdir = _pkg_dir(wd, name)
    current = os.path.join(pdir, "current")
    previous = os.readlink(current) if os.path.islink(current) else None
    tmp_link = os.path.join(pdir, f".current.{uuid.uuid4().hex[:8]}")
    os.symlink(version, tmp_link)
    os.replace(tmp_link, current)
    state = _read_state(wd)
    config_dir = os.path.join(pdir, version)
    entry = {
        "current": version,
        "previous": previous
        if previous != version
        else state.get("packages", {}).get(name, {}).get("previous"),
        "config_dir": config_dir,
    }
    state.setdefault("packages", {})[name] = entry
    state["env"] = _package_env(config_dir)
    write_json_atomic(wd.state(STATE), state)
    return entry


def _package_env(config_dir: str) -> dict[str, str]:
    """The manifest's `env` with its package-root placeholder resolved (SGLANG_MOE_CONFIG_DIR,
    SGLANG_PLUGINS, PYTHONPATH = the plugin's site); a manifest without one: the config dir."""
    manifest = read_json(os.path.join(config_dir, "manifest.json")) or {}
    env = manifest.get("env")
    items = env.items() if isinstance(env, dict) else ()
    out = {str(k): str(v).replace("<package root>", config_dir) for k, v in items}
    return out or {"SGLANG_MOE_CONFIG_DIR": config_dir}


def _unpack(pdir: str, files: dict[str, bytes]) -> str:
    """Write the files to a staging directory next to the versions and re-verify them there."""
    os.makedirs(pdir, exist_ok=True)
    staging = os.path.join(pdir, f".staging-{uuid.uuid4().hex[:8]}")
    try:
        for rel, data in files.items():
            path = os.path.join(staging, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(data)
        verify_tree(staging)  # what landed on disk, not what we meant to write
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def install(wd: Workdir, upload: str, arch: str | None, triton: str | None) -> JsonObject:
    """Verify the uploaded archive, unpack it to kernels/<name>/<version>, switch current."""
    incoming = os.path.join(wd.root, "kernels", ".incoming-")
    if not upload.startswith(incoming) or "/" in upload[len(incoming) :]:
        raise PackageError(
            f"upload {upload!r} is not a kernels/.incoming-* file of the work directory"
        )
    try:
        with open(upload, "rb") as f:
            top, files = read_safe(f.read(MAX_ARCHIVE_BYTES + 1))
        manifest = verify_members(files)
        check_target(manifest, arch, triton)
        name, version = str(manifest["name"]), str(manifest["version"])
        if top != f"{name}-{version}" or not _plain_name(version):
            raise PackageError(f"archive top directory {top!r} does not match {name}-{version}")
        pdir = _pkg_dir(wd, name)
        final = os.path.join(pdir, version)
        if os.path.isdir(final):
            verify_tree(final)  # same version again: only switch, after proving it intact
        else:
            staging = _unpack(pdir, files)
            try:
                os.rename(staging, final)
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return {"name": name, "version": version, **_switch(wd, name, version)}
    finally:
        if os.path.exists(upload):
            os.remove(upload)


def list_packages(wd: Workdir) -> JsonObject:
    state = _read_state(wd)
    out = {}
    base = os.path.join(wd.root, "kernels")
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        pdir = os.path.join(base, name)
        if name.startswith(".") or not os.path.isdir(pdir):
            continue
        versions = sorted(
            v
            for v in os.listdir(pdir)
            if not v.startswith(".") and v != "current" and os.path.isdir(os.path.join(pdir, v))
        )
        link = os.path.join(pdir, "current")
        current = os.readlink(link) if os.path.islink(link) else None
        out[name] = {
            "versions": versions,
            "current": current,
            "previous": state.get("packages", {}).get(name, {}).get("previous"),
        }
    return {"packages": out, "env": state.get("env", {})}


def rollback(wd: Workdir, name: str, to: str | None) -> JsonObject:
    """Switch `current` back to the previous (or the named) installed version, re-verified."""
    entry = _read_state(wd).get("packages", {}).get(name)
    target = to or (entry or {}).get("previous")
    if not target:
        raise PackageError(f"{name}: no previous version to roll back to")
    if not isinstance(target, str) or not _plain_name(target):
        raise PackageError(f"{name}: bad version {target!r}")
    if not os.path.isdir(os.path.join(_pkg_dir(wd, name), target)):
        raise PackageError(f"{name}: version {target} is not installed on the target")
    verify_tree(os.path.join(_pkg_dir(wd, name), target))
    return {"name": name, "version": target, **_switch(wd, name, target)}


def present(wd: Workdir, name: str, version: str) -> JsonObject:
    if not isinstance(version, str) or not _plain_name(version):
        return {"present": False, "reason": f"bad version {version!r}"}
    path = os.path.join(_pkg_dir(wd, name), version)
    try:
        verify_tree(path) if os.path.isdir(path) else None
    except PackageError as exc:
        return {"present": False, "reason": str(exc)}
    return {"present": os.path.isdir(path), "path": path}


def _site_dirs() -> list[str]:
    """The site-packages directories the target's python uses, found as site.py finds them
    (a venv by its pyvenv.cfg) but without running site.py: its .pth files execute code."""
    import site
    import sys

    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefixes, user = [sys.prefix], [site.getusersitepackages()]  # user site: outside a venv
    for cfg in (
        os.path.join(exe_dir, "pyvenv.cfg"),
        os.path.join(os.path.dirname(exe_dir), "pyvenv.cfg"),
    ):
        if os.path.isfile(cfg):
            with open(cfg, encoding="utf-8") as f:
                system = any(
                    line.replace(" ", "").lower() == "include-system-site-packages=true\n"
                    for line in f
                )
            prefixes = [os.path.dirname(exe_dir), *([sys.prefix] if system else [])]
            user = user if system else []
            break
    return [*site.getsitepackages(prefixes), *user]


def probe() -> JsonObject:
    """The target's triton and torch versions (from its python's site-packages) and its GPUs."""
    import subprocess
    from importlib import metadata

    path = _site_dirs()  # the agent runs with -S: where the target's python would look

    def version(dist: str) -> str | None:
        found = next(iter(metadata.distributions(name=dist, path=path)), None)
        return found.version if found is not None else None

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    gpus = [line.split(",", 1) for line in out.strip().splitlines() if "," in line]
    return {
        "triton": version("triton"),
        "torch": version("torch"),
        "gpus": [[n.strip(), c.strip()] for n, c in gpus],
    }


def _refusals(fn: Callable[..., JsonObject], *args: object) -> JsonObject:
    """`fn` (one of the functions above), its package and file errors as the agent's refusals."""
    try:
        return fn(*args)
    except (PackageError, OSError) as exc:
        raise AgentError("package", str(exc)) from None


def op_kernels_install(wd: Workdir, req: JsonObject) -> JsonObject:
    return _refusals(install, wd, str(req.get("upload") or ""), req.get("arch"), req.get("triton"))


def op_kernels_list(wd: Workdir, req: JsonObject) -> JsonObject:
    return _refusals(list_packages, wd)


def op_kernels_rollback(wd: Workdir, req: JsonObject) -> JsonObject:
    return _refusals(rollback, wd, req.get("name"), req.get("version"))


def op_kernels_present(wd: Workdir, req: JsonObject) -> JsonObject:
    return _refusals(present, wd, req.get("name"), req.get("version"))


def op_kernels_probe(wd: Workdir, req: JsonObject) -> JsonObject:
    return probe()
