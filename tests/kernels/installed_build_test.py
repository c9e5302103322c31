"""An installed dsv4ops (a real wheel, not this checkout) builds the kernel package from anywhere.

The kernel sources and configs are package data (`dsv4ops.kernels.sources`), compile results go to
the state directory, and the AOT venv is named by $DSV4OPS_AOT_PYTHON, so nothing depends on the
checkout or the working directory. The artifact is byte-identical to the checkout's build: the
recorded cubin hashes do not depend on where the sources live.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dsv4ops.jsontypes import JSONObject
from dsv4ops.kernels import aot
from testing.kernels import ShippedAot, seed_aot_cache

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.kernels, pytest.mark.slow]

if not aot.aot_python().exists():
    pytest.skip(
        f"{aot.aot_python()} is missing: `make install` creates .venv-aot (triton 3.8.0)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip install` of a wheel built from this checkout into a folder of its own. The wheel is
    built from a copy of what it is made of: setuptools' build/ and egg-info then land in the
    copy, not in the checkout (nor in another run's way)."""
    work = tmp_path_factory.mktemp("wheel")
    had_build = (REPO / "build").exists()
    src = work / "src"
    shutil.copytree(
        REPO / "dsv4ops", src / "dsv4ops", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(work),
            str(src),
        ],
        check=True,
        timeout=300,
        cwd=work,
    )
    assert (REPO / "build").exists() == had_build  # the checkout is left as it was
    wheel = next(work.glob("dsv4ops-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "dsv4ops/kernels/sources/moe_mxfp4.py" in names
    assert any(
        n.startswith("dsv4ops/kernels/sources/configs/triton_3_8_0/E=256,N=512") for n in names
    )
    site = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    return site


def _build(cwd: Path, out: Path, state: Path, pythonpath: str | None) -> JSONObject:
    env = {
        **os.environ,
        "DSV4OPS_STATE_DIR": str(state),
        "DSV4OPS_AOT_PYTHON": str(aot.aot_python()),
    }
    env.pop("DSV4OPS_KERNELS_DIR", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath  # ahead of the editable checkout on sys.path
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "kernels",
            "build",
            "--no-interpreter-check",
            "--version",
            "9.9.9",
            "--out",
            str(out),
            "--json",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report: JSONObject = json.loads(proc.stdout)
    return report


def test_installed_package_builds_from_any_directory_and_matches_the_checkout(
    installed: Path, tmp_path: Path, shipped_aot: ShippedAot
) -> None:
    """The wheel's build compiles from an empty cache; the checkout's build reuses the session's
    compile of the checkout's sources (shipped_aot, also from an empty cache, in another state
    directory), so two independent compiles from two locations must give the same cubins."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "state"
    probe = subprocess.run(
        [sys.executable, "-c", "import dsv4ops.kernels.catalog as c; print(c.kernels_dir())"],
        env={**os.environ, "PYTHONPATH": str(installed)},
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(probe.stdout.strip()).is_relative_to(
        installed
    )  # the wheel's copy, not the checkout

    from_wheel = _build(elsewhere, tmp_path / "dist-wheel", state, str(installed))
    seed_aot_cache(shipped_aot, tmp_path / "state2")
    from_checkout = _build(REPO, tmp_path / "dist-checkout", tmp_path / "state2", None)
    assert Path(from_wheel["path"]).is_file()
    assert from_wheel["config_keys"] and from_wheel["config_keys"] == from_checkout["config_keys"]
    assert from_wheel["sha256"] == from_checkout["sha256"]
    assert not (elsewhere / ".dsv4ops").exists()  # caches went to the state directory
    assert (state / "aot-cache").is_dir()
