"""`dsv4ops kernels ...` end to end through the CLI's error boundary, on a twin-local target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.cli import main
from testing.kernels import Built, ShippedAot, repack

pytestmark = pytest.mark.kernels


@pytest.fixture
def twin_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    workdir = tmp_path / "twin-workdir"
    (profiles / "targets.yaml").write_text(
        "schema_version: 1\ntargets:\n  twin-local:\n    transport: local\n    gpus: [0, 1, 2, 3, 4, 5, 6, 7]\n"
        f"    workdir: {workdir}\n    python: {sys.executable}\n    launcher: twin\n"
        "    bind_host: 127.0.0.1\n    connect_host: 127.0.0.1\n    port_offset: 1000\n    twin_env: {}\n"
    )
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
    return workdir


def test_build_verify_deploy_list_rollback(
    built: Built,
    twin_target: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    warm_aot_cache: ShippedAot,
) -> None:
    # the CLI's build, verify, deploy and rollback are the subject, not the sm_120 compile (the
    # session's shipped_aot compiles every shipped config cold once): the build finds them cached
    assert (
        main(
            [
                "kernels",
                "build",
                "--out",
                str(tmp_path / "dist"),
                "--version",
                "0.3.0",
                "--no-interpreter-check",
                "--json",
            ]
        )
        == 0
    )
    artifact = Path(json.loads(capsys.readouterr().out)["path"])
    assert main(["kernels", "verify", str(artifact)]) == 0
    assert "fits twin-local (sm_120, triton 3.8.0" in capsys.readouterr().out
    assert main(["kernels", "deploy", str(built.v1.path), "--yes"]) == 0
    assert main(["kernels", "deploy", str(artifact), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "deployed dsv4-decode-kernels@0.3.0 to twin-local (previous: 0.1.0)" in out
    assert f"SGLANG_MOE_CONFIG_DIR={twin_target}/kernels/dsv4-decode-kernels/0.3.0" in out
    assert main(["kernels", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["packages"]["dsv4-decode-kernels"]["current"] == "0.3.0"
    assert main(["kernels", "rollback", "--dry-run"]) == 0  # names both versions
    assert (
        "switch dsv4-decode-kernels on twin-local from 0.3.0 back to 0.1.0"
        in capsys.readouterr().out
    )
    assert main(["kernels", "rollback", "--yes"]) == 0
    assert "current is now 0.1.0" in capsys.readouterr().out
    # Each switch is journaled: who, when, what was asked, which package it left current.
    from dsv4ops.journal.store import Journal

    ops = Journal("twin-local").operations()
    assert [(o.kind.value, o.status.value, (o.kernel or {})["action"]) for o in ops] == [
        ("kernels", "SUCCEEDED", "deploy"),
        ("kernels", "SUCCEEDED", "deploy"),
        ("kernels", "SUCCEEDED", "rollback"),
    ]
    assert ops[1].kernel is not None and ops[2].kernel is not None
    assert (
        ops[1].kernel["package"] == "dsv4-decode-kernels@0.3.0"
        and ops[1].kernel["previous"] == "0.1.0"
    )
    assert ops[2].kernel["package"] == "dsv4-decode-kernels@0.1.0" and ops[2].user
    assert Journal("twin-local").deployed() is None  # a kernel switch is not a PD deployment


def test_refusal_is_one_error_line_and_exit_1(
    built: Built, twin_target: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def tamper(files: dict[str, bytes]) -> None:
        key = next(k for k in files if k.startswith("configs/"))
        files[key] = files[key] + b" "

    bad = repack(built.v1.path, tmp_path / "bad.tar.gz", tamper)
    assert main(["kernels", "deploy", str(bad), "--yes"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "checksum mismatch" in err and "Traceback" not in err
    assert not (twin_target / "kernels" / "dsv4-decode-kernels").exists()
    from dsv4ops.journal.store import Journal

    (op,) = Journal("twin-local").operations()
    assert op.status.value == "FAILED" and "checksum mismatch" in (op.message or "")
    assert op.kernel == {"action": "deploy", "artifact": "bad.tar.gz"}
    assert main(["kernels", "verify", str(tmp_path / "missing.tar.gz")]) == 1
    assert "cannot read artifact" in capsys.readouterr().err


def test_a_rollback_with_nothing_to_switch_to_is_refused_before_it_asks(
    twin_target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its dry run planned "switch ... back to its previous version" on a target with no
    package, and its question asked the same: only the yes met the refusal."""
    for args in (["--dry-run"], [], ["--to", "0.9.9", "--dry-run"]):
        assert main(["kernels", "rollback", *args]) == 1
        out, err = capsys.readouterr()
        assert "dsv4-decode-kernels: not installed on twin-local; nothing to roll back" in err
        assert "kernels list --target twin-local" in err and "plan:" not in out, out + err
    from dsv4ops.journal.store import Journal

    assert Journal("twin-local").operations() == []


def test_cli_and_pipeline_modules_do_not_import_torch_or_triton() -> None:
    code = (
        "import sys, dsv4ops.cli.kernels, dsv4ops.kernels, dsv4ops.kernels.build, "
        "dsv4ops.kernels.deploy; bad = {'torch', 'triton'} & set(sys.modules); "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_deploy_is_refused_while_a_pd_deploy_holds_the_lock(
    built: Built, twin_target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsv4ops.remote import LocalExecutor, Supervisor, lock_holder

    supervisor = Supervisor(LocalExecutor(), str(twin_target), python=sys.executable)
    holder = lock_holder("deploy")
    supervisor.lock_acquire(holder)
    try:
        assert main(["kernels", "deploy", str(built.v1.path), "--yes"]) != 0
        assert "lock" in capsys.readouterr().err.lower()
        assert not (twin_target / "kernels" / "dsv4-decode-kernels").exists()
    finally:
        supervisor.lock_release(holder["op_id"])
    assert main(["kernels", "deploy", str(built.v1.path), "--yes"]) == 0


def test_a_dead_deploys_lock_and_unfinished_journal_block_a_switch_until_recover(
    built: Built, twin_target: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kernel switch takes the lock through the deploy's operation context: a deploy whose CLI
    died (its lock left by a dead process, its journal entry never ended) blocks the switch with
    the deploy's message, and `--recover` resolves it like `deploy --recover` does."""
    from dsv4ops.journal.records import Kind, Status
    from dsv4ops.journal.store import Journal
    from dsv4ops.remote import LocalExecutor, Supervisor, lock_holder

    journal = Journal("twin-local")
    crashed = journal.begin(Kind.DEPLOY, profile={"name": "baseline"})
    journal.transition(crashed, Status.RUNNING)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    supervisor = Supervisor(LocalExecutor(), str(twin_target), python=sys.executable)
    supervisor.lock_acquire(dict(lock_holder("dsv4ops deploy baseline", crashed), pid=proc.pid))

    assert main(["kernels", "deploy", str(built.v1.path), "--yes"]) == 1
    err = capsys.readouterr().err
    assert f"deploy {crashed} of baseline was interrupted" in err and "--recover" in err
    assert [o.op for o in journal.operations()] == [crashed]  # the refusal journaled nothing
    assert not (twin_target / "kernels" / "dsv4-decode-kernels").exists()

    assert main(["kernels", "deploy", str(built.v1.path), "--recover", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "broke the deploy lock left by dead process" in out
    ops = journal.operations()
    assert ops[0].status is Status.ABANDONED and (ops[-1].kind, ops[-1].status) == (
        Kind.KERNELS,
        Status.SUCCEEDED,
    )
    assert supervisor.lock_info() is None  # released after the switch
