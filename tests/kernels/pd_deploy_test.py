"""A kernel package through the whole deploy path on a twin target with the real router, all via
the CLI: `kernels deploy`, then a profile naming a version that is not installed (refused in
preflight, nothing changed), then the profile naming the deployed one (the decode loads it, the
journal and `status` show it), then a tampered install (refused by the manifest check)."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from testing.kernels import Built
from testing.orchestrate import OrchEnv, commit_all, kill_all, make_env, our_processes
from testing.profiles import TRITON_MOE_PATH_YAML

pytestmark = [pytest.mark.kernels, pytest.mark.slow, pytest.mark.router]
PKG = "dsv4-decode-kernels"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OrchEnv]:
    env = make_env(tmp_path)
    for name, version in (("kernels-on", "0.2.0"), ("kernels-absent", "9.9.9")):
        (env.profiles_dir / f"{name}.yaml").write_text(
            f"schema_version: 1\nextends: baseline\nkernel_package: {PKG}@{version}\n"
            + TRITON_MOE_PATH_YAML
        )
    commit_all(env, "kernel profiles")
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    yield env
    with contextlib.suppress(Exception):
        main(["stop", "--target", env.target, "--yes", "--recover"])
    kill_all(env)
    assert our_processes(env) == [], "orphaned processes after the test"


def _cli(capsys: pytest.CaptureFixture[str], env: OrchEnv, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--target", env.target])
    out, err = capsys.readouterr()
    return code, out, err


def _kinds(env: OrchEnv) -> list[tuple[str, str]]:
    return [(o.kind.value, o.status.value) for o in Journal(env.target).operations()]


def test_profile_kernel_package_is_checked_loaded_and_shown(
    built: Built, env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, env, "kernels", "deploy", str(built.v2.path), "--yes")
    assert code == 0, err
    kernels_op = Journal(env.target).operations()[-1]
    assert kernels_op.kernel is not None
    assert (
        kernels_op.kernel["package"] == f"{PKG}@0.2.0" and kernels_op.kernel["action"] == "deploy"
    )
    code, out, _ = _cli(capsys, env, "journal")
    assert code == 0 and f"{PKG}@0.2.0" in out and "kernels" in out

    # A version that is not installed: refused before anything changes.
    before = _kinds(env)
    code, _, err = _cli(capsys, env, "deploy", "kernels-absent", "--yes", "--no-canary")
    assert code == 1 and "preflight failed" in err and f"{PKG}@9.9.9 is not installed" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert _kinds(env) == before and our_processes(env) == []
    assert not (env.workdir / "run").exists()

    code, out, err = _cli(capsys, env, "deploy", "kernels-on", "--yes", "--no-canary", "--json")
    assert code == 0, err
    result = json.loads(out)
    check = f"check decode loaded kernel package {PKG}@0.2.0"
    assert any(s["title"] == check and s["ok"] for s in result["steps"]), result["steps"]
    op = Journal(env.target).get(result["op_id"])
    config_dir = f"{env.workdir}/kernels/{PKG}/0.2.0"
    assert op.profile is not None and op.profile["kernel_package"] == f"{PKG}@0.2.0"
    decode = next(c for c in op.components if c["name"] == "decode")
    assert decode["env"]["SGLANG_MOE_CONFIG_DIR"] == config_dir
    url = f"http://127.0.0.1:{decode['port']}/server_info"
    with urllib.request.urlopen(url, timeout=10) as resp:
        info = json.loads(resp.read())
    assert info["twin_kernel_package"]["name"] == PKG
    assert info["twin_kernel_package"]["version"] == "0.2.0"

    code, out, err = _cli(capsys, env, "status", "--json")
    st = json.loads(out)
    assert code == 0 and st["healthy"] and st["drift"] == [], st
    assert st["deployed"]["kernel_package"] == f"{PKG}@0.2.0"
    comps = {c["name"]: c for c in st["components"]}
    assert comps["decode"]["kernel_package"] == f"{PKG}@0.2.0"
    code, out, _ = _cli(capsys, env, "status")
    assert f"kernel package: {PKG}@0.2.0" in out and f"kernels {PKG}@0.2.0" in out

    # A file of the installed package changed on the target: the manifest check refuses it.
    cfg = next((Path(config_dir) / "configs").rglob("*.json"))
    cfg.chmod(0o644)
    cfg.write_bytes(cfg.read_bytes() + b" ")
    before = _kinds(env)
    code, _, err = _cli(capsys, env, "deploy", "kernels-on", "--yes", "--no-canary")
    assert code == 1 and "do not match its manifest" in err, err
    assert _kinds(env) == before and len(our_processes(env)) == 3

    code, _, err = _cli(capsys, env, "stop", "--yes")
    assert code == 0, err
    assert our_processes(env) == []
