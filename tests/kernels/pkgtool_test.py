"""Archive rules shared by `kernels verify` and the agent's `kernels_install` on the target
(`dsv4ops/remote/agent/kernel_archive.py`, the one home of the rules)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from dsv4ops.remote.agent.kernel_archive import PackageError, read_safe


def _tar(*entries: tarfile.TarInfo) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info in entries:
            data = b"x" if info.isfile() else None
            if data:
                info.size = 1
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_entry("pkg-1/../escape.json"), "escapes the package directory"),
        (_entry("/etc/cron.d/evil"), "escapes the package directory"),
        (_entry("pkg-1/configs/x.json", tarfile.SYMTYPE, "/etc/passwd"), "is a link (symlink"),
        (
            _entry("pkg-1/configs/y.json", tarfile.LNKTYPE, "pkg-1/manifest.json"),
            "is a link (hardlink",
        ),
        (_entry("pkg-1/dev", tarfile.CHRTYPE), "not a regular file"),
        (_entry("other-2/x.json"), "outside the top directory"),
    ],
)
def test_unsafe_entries_are_refused(bad: tarfile.TarInfo, message: str) -> None:
    with pytest.raises(PackageError, match=message.replace("(", r"\(")):
        read_safe(_tar(_entry("pkg-1/manifest.json"), bad))


def test_garbage_and_missing_manifest_are_refused() -> None:
    with pytest.raises(PackageError, match="not a readable"):
        read_safe(b"not a tarball")
    with pytest.raises(PackageError, match="no manifest.json"):
        read_safe(_tar(_entry("pkg-1/configs/a.json")))


def test_rollback_to_a_path_like_version_is_refused(tmp_path: Path) -> None:
    from dsv4ops.remote.agent.common import Workdir
    from dsv4ops.remote.agent.kernels import rollback

    with pytest.raises(PackageError, match="bad version"):
        rollback(Workdir(str(tmp_path)), "dsv4-decode-kernels", "../../etc")
    with pytest.raises(PackageError, match="bad package name"):
        rollback(Workdir(str(tmp_path)), "..", "0.1.0")


def test_the_operator_side_uses_the_agents_archive_rules() -> None:
    """One home: `kernels verify` refuses with the very functions the agent ships."""
    from dsv4ops.kernels import deploy
    from dsv4ops.remote.agent import kernel_archive

    assert vars(deploy)["kernel_archive"] is kernel_archive  # the module deploy imported, by name


def test_an_archive_past_the_bounds_is_refused_before_anything_is_extracted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bounds (64 MB packed, 256 MB unpacked: a package is tens of KB) hold on both sides,
    here scaled down: the files' sizes are added from their headers, before any is read."""
    from dsv4ops.remote.agent import kernel_archive

    archive = _tar(_entry("pkg-1/manifest.json"), _entry("pkg-1/configs/a.json"))
    extracted: list[object] = []
    monkeypatch.setattr(
        tarfile.TarFile,
        "extractfile",
        lambda self, m: extracted.append(m),  # noqa: ARG005
    )
    monkeypatch.setattr(kernel_archive, "MAX_UNPACKED_BYTES", 1)
    with pytest.raises(PackageError, match="files add up to 2 bytes, over 1: not a kernel"):
        read_safe(archive)
    monkeypatch.setattr(kernel_archive, "MAX_ARCHIVE_BYTES", len(archive) - 1)
    with pytest.raises(PackageError, match=f"over {len(archive) - 1} bytes: not a kernel package"):
        read_safe(archive)
    assert extracted == []


def test_kernels_verify_refuses_a_device_a_fifo_and_a_huge_file_at_once(tmp_path: Path) -> None:
    """`kernels verify` (and deploy, which verifies first) read its artifact whole: /dev/zero
    never ended, a FIFO waited for a writer, a wrong multi-GB file went into memory."""
    import os
    import subprocess
    import sys

    from dsv4ops.remote.agent.kernel_archive import MAX_ARCHIVE_BYTES

    fifo = tmp_path / "pkg.tar.gz"
    os.mkfifo(fifo)
    huge = tmp_path / "model.safetensors"
    with open(huge, "wb") as f:
        f.truncate(MAX_ARCHIVE_BYTES + 1)  # sparse
    for path, why in (
        ("/dev/zero", "cannot read artifact: not a regular file"),
        (str(fifo), "cannot read artifact: not a regular file"),
        (str(huge), f"is {MAX_ARCHIVE_BYTES + 1} bytes; at most {MAX_ARCHIVE_BYTES} are read"),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "dsv4ops", "kernels", "verify", path],
            capture_output=True,
            text=True,
            timeout=60,  # the old code never ended on the first two
        )
        assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
        assert f"{path}: " in run.stderr and why in run.stderr, run.stderr
