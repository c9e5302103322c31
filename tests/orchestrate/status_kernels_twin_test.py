"""Kernel-package drift in `dsv4ops status`, through the real twin processes and the real router:
no drift right after a deploy that loads the pinned package; drift once `kernels rollback` moves
the target's current pointer under the running unit; drift when the decode runs without the
package the deployment pinned, gone once the unit is redeployed (the remedy the line names).

The packages are hand-made (a manifest with checksums and one MoE config file), installed by
the target agent's own `kernels_install` (what `kernels deploy` calls after its local checks), so
no kernel build is needed here."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any, cast

import pytest

from dsv4ops.cli.status import render
from dsv4ops.kernels.deploy import kernel_call
from dsv4ops.kernels.plugin_dist import plugin_members
from dsv4ops.orchestrate.status_report import StatusReport
from dsv4ops.remote import LocalExecutor, Supervisor
from dsv4ops.sglang_paths import dsv4_flash_config_names, plugin_env
from dsv4ops.twin.kernel_package import BOX_DEVICE_NAME
from dsv4ops.usecases import render as R
from testing.kernels import write_tar
from testing.orchestrate import OrchEnv, cli, cli_operator, commit_all
from testing.profiles import TRITON_MOE_PATH_YAML

pytestmark = [pytest.mark.slow, pytest.mark.router]
PKG = "dsv4-decode-kernels"
REF = f"{PKG}@0.2.0"
CONFIG = f"configs/triton_3_8_0/{dsv4_flash_config_names(BOX_DEVICE_NAME)[0]}"


def install(env: OrchEnv, tmp: Path, version: str) -> None:
    """What `kernels deploy` leaves on the target: kernels/<name>/<version> (its config and its
    plugin distribution), current, state."""
    files = {
        CONFIG: json.dumps({"1": {"BLOCK_SIZE_M": 16, "num_warps": 4}}).encode(),
        **plugin_members(PKG, version),
    }
    manifest = {
        "name": PKG,
        "version": version,
        "env": plugin_env(PKG, "<package root>"),
        "files": [
            {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
            for p, d in files.items()
        ],
    }
    files["manifest.json"] = json.dumps(manifest).encode()
    top = f"{PKG}-{version}"
    upload = write_tar(
        tmp / f"{top}.tar.gz",
        [(tarfile.TarInfo(f"{top}/{rel}"), data) for rel, data in sorted(files.items())],
    )
    incoming = Path(env.workdir) / "kernels" / f".incoming-{version}.tar.gz"
    incoming.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(upload, incoming)
    sup = Supervisor(LocalExecutor(), str(env.workdir), sys.executable)
    kernel_call(sup, "kernels_install", upload=str(incoming), arch=None, triton=None)


def status(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, st, err = cli(env, capsys, "status", "--json")
    assert isinstance(st, dict), err  # --json prints one object
    # drift is reported in the report, and NOT HEALTHY is exit 2 (dsv4ops/exitcodes.py)
    assert code == (0 if st["healthy"] else 2) and st["exit"] == code, err
    return st


def test_kernel_package_drift_through_the_twin(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    install(env, tmp_path, "0.1.0")
    install(env, tmp_path, "0.2.0")  # current: 0.2.0, previous: 0.1.0
    (env.profiles_dir / "kernels-on.yaml").write_text(
        f"schema_version: 1\nextends: baseline\nkernel_package: {REF}\n" + TRITON_MOE_PATH_YAML
    )
    commit_all(env, "kernel profile")

    # The unit started without the package (an operator without kernel support wired in adds
    # no SGLANG_MOE_CONFIG_DIR and skips the loaded check): the decode reports none.
    op, ctx = cli_operator(env, kernels=None)
    try:
        out = op.deploy(R.deployment_for("kernels-on", ctx.target), run_canary=False)
    finally:
        ctx.close()
    assert out.ok, out.message
    st = status(env, capsys)
    assert not st["healthy"]
    (line,) = st["drift"]  # nothing else differs: the journal recorded exactly what runs
    assert (
        f"active on target {REF}, decode loaded none (not loaded: no '[dsv4ops-kernel-plugin]"
        in line
    )
    assert (
        "restart the unit with `dsv4ops deploy kernels-on --target " in line
        and "(prefill, decode and router" in line
    )
    decode = next(c for c in st["components"] if c["name"] == "decode")
    assert decode["kernel_package"] is None and decode["healthy"]

    # The remedy it names: the unit restarted by the deploy loads the pinned package.
    code, _, err = cli(
        env,
        capsys,
        "deploy",
        "kernels-on",
        "--yes",
        "--canary-duration",
        "2",
        "--accept-inconclusive-canary",
    )  # gated: the known-good to return to
    assert code == 0, err
    st = status(env, capsys)
    assert st["healthy"] and st["drift"] == [], st
    evidence = st["kernel_package"].pop("evidence")
    assert st["kernel_package"] == {
        "deployed": REF,
        "active": REF,
        "active_detail": REF,
        "loaded": REF,
        "loaded_detail": REF,
        "drift": False,
    }
    # The twin decode loaded the plugin (its own line) and SGLang-style lookup read its config.
    assert evidence.startswith(f"in use: [dsv4ops-kernel-plugin] loaded {PKG} 0.2.0 pid=")
    assert f"Using MoE kernel config from {env.workdir}/kernels/{PKG}/0.2.0/{CONFIG}." in evidence

    # The target's pointer moves under the running unit: the decode still runs 0.2.0.
    code, _, err = cli(env, capsys, "kernels", "rollback", "--yes")
    assert code == 0, err
    st = status(env, capsys)
    assert not st["healthy"]
    (line,) = st["drift"]
    assert line.startswith(
        f"kernel package: deployed {REF}, active on target {PKG}@0.1.0, decode loaded {REF}"
    )
    assert f"`dsv4ops kernels rollback --name {PKG} --to 0.2.0 --target " in line
    assert "`dsv4ops deploy kernels-on --target " in line and "Never restart decode alone" in line
    text = "\n".join(render(cast("StatusReport", st)))  # the --json output, as printed
    assert "NOT HEALTHY" in text and f"drift: {line}" in text
    assert f"kernel package: {REF} (active on target: {PKG}@0.1.0; decode loaded: {REF})" in text

    # A decode whose env keeps SGLang's loader from loading the plugin (the profile's own
    # SGLANG_PLUGINS wins): the real twin starts without it and the deploy gate says so.
    (env.profiles_dir / "kernels-unloaded.yaml").write_text(
        f"schema_version: 1\nextends: baseline\nkernel_package: {REF}\n"
        + TRITON_MOE_PATH_YAML
        + '    SGLANG_PLUGINS: "someone_else"\n'
    )
    commit_all(env, "a profile whose decode loads no plugin")
    code, _, err = cli(env, capsys, "deploy", "kernels-unloaded", "--yes", "--no-canary")
    assert code != 0
    assert (
        f"kernel package {REF} is not in use: not loaded: no '[dsv4ops-kernel-plugin] loaded'"
        in " ".join(err.split())
    ), err
    assert "Rolled back automatically to the known-good deployment kernels-on" in err
