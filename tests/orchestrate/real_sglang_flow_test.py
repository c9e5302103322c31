"""dsv4ops against real SGLang 0.5.23 on CPU, through the real router 0.3.2 (`make test-real-sglang`).

deploy -> status -> canary -> deploy a second revision -> rollback -> watch --once -> stop ->
watch --once, on a target like the shipped `sglang-cpu` (launcher sglang, the real venv, PD over
mooncake TCP) with profile `tiny-cpu`, each verb through `cli.main` as a user runs it. What the
tiny model can do is declared in its profile (`probe.tool_call: auto`, `canary.tool_calls:
false`), and every report must say what was skipped. Two real servers (~7 GB) and ~20 min on two
loaded cores. Skipped unless REAL_SGLANG names a built env, so `make test` never starts one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.cli import main
from testing.orchestrate import pick_offset

ROOT = Path(__file__).resolve().parents[2]
ENV_DIR = Path(os.environ.get("REAL_SGLANG") or ROOT / ".dsv4ops" / "sglang-cpu")
TARGET = "sglang-cpu-e2e"

pytestmark = [
    pytest.mark.real_sglang,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(
        os.environ.get("REAL_SGLANG") is None or not (ENV_DIR / ".ready").is_file(),
        reason="needs the real-SGLang env (`make test-real-sglang`)",
    ),
]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=test", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=30,
    )


@pytest.fixture
def real_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A git repo holding tiny-cpu and a target on free ports whose workdir sits next to the
    shipped one (the profile's ../model and ../shim resolve the same)."""
    profiles = tmp_path / "repo" / "profiles"
    profiles.mkdir(parents=True)
    shutil.copy(ROOT / "profiles" / "tiny-cpu.yaml", profiles / "tiny-cpu.yaml")
    workdir = ENV_DIR / "ops-e2e"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    (profiles / "targets.yaml").write_text(f"""schema_version: 1
targets:
  {TARGET}:
    transport: local
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    workdir: {workdir}
    python: {ENV_DIR / 'venv' / 'bin' / 'python'}
    launcher: sglang
    bind_host: 127.0.0.1
    connect_host: 127.0.0.1
    port_offset: {pick_offset()}
""")
    _git(profiles.parent, "init", "-q")
    _git(profiles.parent, "add", "-A")
    _git(profiles.parent, "commit", "-q", "-m", "tiny-cpu")
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(tmp_path / "state"))
    yield profiles, workdir
    main(["stop", "--target", TARGET, "--yes", "--recover"])  # never leave 7 GB behind


def _run(capsys: pytest.CaptureFixture[str], log: list[str], *args: str) -> tuple[int, str]:
    code = main([*args, "--target", TARGET])
    out, err = capsys.readouterr()
    log.append(f"$ dsv4ops {' '.join(args)}  -> {code}\n{out}{err}")
    return code, out + err


def _status(capsys: pytest.CaptureFixture[str], log: list[str]) -> tuple[str, str | None]:
    code, out = _run(capsys, log, "status", "--json")
    report = json.loads(out[: out.rindex("}") + 1])
    assert code == (0 if report["status"] == "HEALTHY" else code), out
    return report["status"], (report["deployed"] or {}).get("profile")


def test_deploy_canary_rollback_stop_and_watch_against_real_sglang(
    real_env: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    profiles, workdir = real_env
    log: list[str] = []
    try:
        _flow(profiles, capsys, log)
    finally:
        (ENV_DIR / "last-run").mkdir(exist_ok=True)
        (ENV_DIR / "last-run" / "flow.txt").write_text("\n".join(log))


def _flow(profiles: Path, capsys: pytest.CaptureFixture[str], log: list[str]) -> None:
    code, out = _run(capsys, log, "deploy", "tiny-cpu", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    # the probe says which tool-call check ran; the gate that the canary's were off
    assert "tool call asked with tool_choice auto, not forced" in out, out
    assert _status(capsys, log) == ("HEALTHY", "tiny-cpu")
    code, out = _run(capsys, log, "canary", "--profile", "tiny-cpu", "--suite", "smoke")
    assert code in (0, 4), out  # PASS, or INCONCLUSIVE for the loaded client's own lag
    assert "tool-call checks off by the profile" in out, out
    text = (profiles / "tiny-cpu.yaml").read_text()
    (profiles / "tiny-cpu-r2.yaml").write_text(
        text.replace("max_running_requests: 16", "max_running_requests: 8", 1)
    )  # the prefill's
    _git(profiles.parent, "add", "-A")
    _git(profiles.parent, "commit", "-q", "-m", "tiny-cpu r2")
    code, out = _run(capsys, log, "deploy", "tiny-cpu-r2", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    code, out = _run(capsys, log, "rollback", "--yes")
    assert code == 0, out
    assert _status(capsys, log) == ("HEALTHY", "tiny-cpu")  # the first revision, restored
    code, out = _run(capsys, log, "watch", "--once")
    assert code == 0, out
    code, out = _run(capsys, log, "stop", "--yes")
    assert code == 0, out
    code, out = _run(capsys, log, "watch", "--once")
    assert code != 0 and "nothing to watch" in out, out
