"""build -> verify -> deploy -> rollback on a target, locally and through a real OpenSSH server,
and every refusal leaves the target exactly as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.errors import KernelPackageError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels import deploy as kd
from dsv4ops.kernels import loaded_check, package_present
from dsv4ops.kernels.manifest import TargetRuntime
from dsv4ops.remote.local import LocalExecutor
from dsv4ops.remote.supervisor import Supervisor
from dsv4ops.sglang_paths import moe_path
from dsv4ops.twin.kernel_package import resolve_kernel_config
from testing.kernels import Built, edit_manifest, read_members, repack, snapshot, write_tar

pytestmark = pytest.mark.kernels

BOX = kd.twin_runtime()
TRITON = {"SGLANG_DSV4_FP4_DEQUANT": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
NAME = "dsv4-decode-kernels"


@dataclass
class Tgt:
    executor: Any
    workdir: str
    python: str = sys.executable

    @property
    def root(self) -> Path:
        return Path(self.workdir)


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tgt]:
    executor = (
        request.getfixturevalue("sshd").executor() if request.param == "ssh" else LocalExecutor()
    )
    try:
        yield Tgt(executor, str(tmp_path / "target"))
    finally:
        executor.close()


@pytest.fixture
def local_target(tmp_path: Path) -> Tgt:
    return Tgt(LocalExecutor(), str(tmp_path / "target"))


def _state(t: Tgt) -> JSONObject:
    state: JSONObject = json.loads((t.root / "state" / "kernels.json").read_text())
    return state


def test_build_verify_deploy_rollback(built: Built, target: Tgt) -> None:
    kd.verify(built.v1.path, BOX)
    first = kd.deploy(target.executor, target.workdir, target.python, built.v1.path, BOX)
    assert (first["version"], first["previous"]) == ("0.1.0", None)
    second = kd.deploy(target.executor, target.workdir, target.python, built.v2.path, BOX)
    assert (second["version"], second["previous"]) == ("0.2.0", "0.1.0")
    pkg_dir = target.root / "kernels" / NAME
    assert (pkg_dir / "current").resolve() == pkg_dir / "0.2.0"
    assert _state(target)["env"]["SGLANG_MOE_CONFIG_DIR"] == str(pkg_dir / "0.2.0")
    assert not list((target.root / "kernels").glob(".incoming-*"))  # upload cleaned up

    listing = kd.list_packages(target.executor, target.workdir, target.python)
    assert listing["packages"][NAME] == {
        "versions": ["0.1.0", "0.2.0"],
        "current": "0.2.0",
        "previous": "0.1.0",
    }

    back = kd.rollback(target.executor, target.workdir, target.python, NAME)
    assert back["version"] == "0.1.0"
    assert (pkg_dir / "current").resolve() == pkg_dir / "0.1.0"
    assert _state(target)["env"]["SGLANG_MOE_CONFIG_DIR"] == str(pkg_dir / "0.1.0")
    assert package_present(target.executor, target.workdir, f"{NAME}@0.2.0", python=target.python)
    assert not package_present(
        target.executor, target.workdir, f"{NAME}@9.9.9", python=target.python
    )


def test_the_twin_loads_the_deployed_package_and_the_check_sees_it(
    built: Built, local_target: Tgt
) -> None:
    kd.deploy(local_target.executor, local_target.workdir, local_target.python, built.v1.path, BOX)
    env = {**_state(local_target)["env"], **TRITON}
    root = env["SGLANG_MOE_CONFIG_DIR"]
    assert env["SGLANG_PLUGINS"] == "dsv4_decode_kernels" and env["PYTHONPATH"] == f"{root}/site"
    choice = resolve_kernel_config(env)  # the twin's own SGLang-style lookup
    assert choice.config_dir == f"{root}/configs/triton_3_8_0" and choice.log_line is not None
    # The plugin's line is what a process that loaded it prints: run its register() here.
    plugin_line = subprocess.run(
        [sys.executable, "-c", "import dsv4ops_kernel_plugin as p; p.register()"],
        env={**os.environ, "PYTHONPATH": env["PYTHONPATH"]},
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    moe = moe_path([], env)
    result = loaded_check(
        "{}", plugin_line + choice.log_line + "\n", expected=f"{NAME}@0.1.0", moe=moe
    )
    assert result.used and result.package == f"{NAME}@0.1.0", result
    assert not loaded_check(
        "{}", plugin_line + choice.log_line, expected=f"{NAME}@0.2.0", moe=moe
    ).used
    assert not loaded_check("{}", choice.log_line, expected=f"{NAME}@0.1.0", moe=moe).used


def _tar_with(built_path: Path, dst: Path, extra: tarfile.TarInfo) -> Path:
    top, files = read_members(built_path)
    entries = [(tarfile.TarInfo(f"{top}/{rel}"), data) for rel, data in sorted(files.items())]
    return write_tar(dst, [*entries, (extra, b"x" if extra.isfile() else None)])


def _link(name: str, kind: bytes, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _bad_artifacts(src: Path, d: Path) -> dict[str, tuple[Path, str]]:
    top = "dsv4-decode-kernels-0.2.0"
    moe = next(
        k for k in read_members(src)[1] if k.startswith("configs/") and not k.endswith("_down.json")
    )

    def tamper(files: dict[str, bytes]) -> None:
        files[moe] = files[moe].replace(b'"BLOCK_SIZE_N": 32', b'"BLOCK_SIZE_N": 256', 1)

    def arch(files: dict[str, bytes]) -> None:
        edit_manifest(files, lambda m: m["target"].update(arch="sm_100"))

    def triton(files: dict[str, bytes]) -> None:
        edit_manifest(files, lambda m: m["toolchain"].update(triton="3.7.1"))

    def extra(files: dict[str, bytes]) -> None:
        files["configs/triton_3_8_0/E=1,N=1,device_name=x.json"] = b"{}"

    return {
        "tampered": (repack(src, d / "t.tar.gz", tamper), "checksum mismatch"),
        "unlisted": (repack(src, d / "u.tar.gz", extra), "not in the manifest"),
        "dotdot": (
            _tar_with(src, d / "d.tar.gz", tarfile.TarInfo(f"{top}/../../evil.json")),
            "escapes",
        ),
        "absolute": (
            _tar_with(src, d / "a.tar.gz", tarfile.TarInfo("/tmp/dsv4ops-evil.json")),
            "escapes",
        ),
        "symlink": (
            _tar_with(
                src, d / "s.tar.gz", _link(f"{top}/configs/l.json", tarfile.SYMTYPE, "/etc/passwd")
            ),
            "symlink",
        ),
        "hardlink": (
            _tar_with(
                src,
                d / "h.tar.gz",
                _link(f"{top}/configs/h.json", tarfile.LNKTYPE, f"{top}/manifest.json"),
            ),
            "hardlink",
        ),
        "arch": (
            repack(src, d / "r.tar.gz", arch, fix_manifest=True),
            "targets sm_100, the target runs sm_120",
        ),
        "triton": (
            repack(src, d / "v.tar.gz", triton, fix_manifest=True),
            "built for triton 3.7.1",
        ),
    }


@pytest.mark.parametrize(
    "case", ["tampered", "unlisted", "dotdot", "absolute", "symlink", "hardlink", "arch", "triton"]
)
def test_refused_artifacts_leave_the_target_unchanged(
    built: Built, local_target: Tgt, tmp_path: Path, case: str
) -> None:
    t = local_target
    kd.deploy(t.executor, t.workdir, t.python, built.v1.path, BOX)
    before = snapshot(t.root)
    path, message = _bad_artifacts(built.v2.path, tmp_path)[case]
    with pytest.raises(KernelPackageError, match=message):
        kd.deploy(t.executor, t.workdir, t.python, path, BOX)
    with pytest.raises(KernelPackageError, match=message):
        kd.verify(path, BOX)
    assert snapshot(t.root) == before
    assert not Path("/tmp/dsv4ops-evil.json").exists()


def test_the_target_refuses_a_file_corrupted_after_the_local_check(
    built: Built, target: Tgt, tmp_path: Path
) -> None:
    """Defence in depth: skip the operator-side checks and hand the target a tampered upload."""
    kd.deploy(target.executor, target.workdir, target.python, built.v1.path, BOX)
    before = snapshot(target.root)
    bad, _ = _bad_artifacts(built.v2.path, tmp_path)["tampered"]
    upload = f"{target.workdir}/kernels/.incoming-test.tar.gz"
    target.executor.put(bad, upload)
    with pytest.raises(KernelPackageError, match="checksum mismatch"):
        kd.kernel_call(
            Supervisor(target.executor, target.workdir, target.python),
            "kernels_install",
            upload=upload,
            arch="sm_120",
            triton="3.8.0",
        )
    assert snapshot(target.root) == before  # upload removed, nothing unpacked, current unchanged


def test_other_runtime_and_missing_previous_are_refused(built: Built, local_target: Tgt) -> None:
    t = local_target
    other = TargetRuntime("sm_120", "3.9.0", ("NVIDIA_B200",), source="test")
    with pytest.raises(KernelPackageError, match="triton 3.9.0.*NVIDIA_B200"):
        kd.verify(built.v1.path, other)
    kd.deploy(t.executor, t.workdir, t.python, built.v1.path, BOX)
    with pytest.raises(KernelPackageError, match="no previous version"):
        kd.rollback(t.executor, t.workdir, t.python, NAME)


def test_package_present_is_false_when_the_installed_copy_was_modified(
    built: Built, local_target: Tgt
) -> None:
    t = local_target
    kd.deploy(t.executor, t.workdir, t.python, built.v1.path, BOX)
    ref = f"{NAME}@0.1.0"
    assert package_present(t.executor, t.workdir, ref, python=t.python)
    config = next((t.root / "kernels" / NAME / "0.1.0" / "configs").glob("triton_3_8_0/*.json"))
    config.write_text("{}")
    assert not package_present(t.executor, t.workdir, ref, python=t.python)
    with pytest.raises(KernelPackageError, match="name@version"):
        package_present(t.executor, t.workdir, "no-version")


def test_the_runtime_probe_asks_the_target_through_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's triton as its python sees it (site-packages, although the agent runs -I -S)
    and its GPUs from nvidia-smi; no GPU means the probe refuses instead of guessing."""
    from importlib import metadata

    sup = Supervisor(LocalExecutor(), str(tmp_path / "target"), sys.executable)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(
        KernelPackageError, match=f"cannot tell.*triton={metadata.version('triton')}"
    ):
        kd.probe_runtime(sup)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0'\n")
    smi.chmod(0o755)
    runtime = kd.probe_runtime(sup)
    assert (runtime.arch, runtime.triton) == ("sm_120", metadata.version("triton"))
    assert runtime.device_names == ("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition",)
