"""dsv4ops against real SGLang 0.5.23 on CPU, through the real router 0.3.2 (`make test-real-sglang`).

deploy -> status -> canary -> deploy a second revision -> rollback -> watch --once -> stop ->
watch --once, on a target like the shipped `sglang-cpu` (launcher sglang, the real venv, PD over
mooncake TCP) with profile `tiny-cpu`, each verb through `cli.main` as a user runs it. The tiny
tool model speaks DSV4 (`--tool-call-parser deepseekv4 --reasoning-parser deepseek-v4`): the
canary's tool-call checks run (`canary.tool_calls: true`); the probe asks its call with
`tool_choice: auto` (`probe.tool_call: auto`) and says so. Two real servers (~7 GB) and ~20 min on two
loaded cores. Skipped unless REAL_SGLANG names a built env, so `make test` never starts one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.orchestrate import REAL_BUILT, REAL_WHY_SKIPPED, RealTarget, real_git, real_target

pytestmark = [
    pytest.mark.real_sglang,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(not REAL_BUILT, reason=REAL_WHY_SKIPPED),
]


def _status(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> tuple[str, str | None]:
    code, report = t.run_json(capsys, "status")
    assert code == (0 if report["status"] == "HEALTHY" else code), report
    return report["status"], (report["deployed"] or {}).get("profile")


def test_deploy_canary_rollback_stop_and_watch_against_real_sglang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with real_target(tmp_path, "sglang-cpu-e2e", "ops-e2e") as t:
        try:
            _flow(t, capsys)
        finally:
            t.keep_log("flow.txt")


def _flow(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> None:
    profiles = t.profiles
    code, out = t.run(capsys, "deploy", "tiny-cpu", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    # the probe says which tool-call check ran; the gate that the canary's were off
    assert "tool call asked with tool_choice auto, not forced" in out, out
    assert _status(t, capsys) == ("HEALTHY", "tiny-cpu")
    code, out = t.run(capsys, "canary", "--profile", "tiny-cpu", "--suite", "smoke")
    assert code in (0, 4), out  # PASS, or INCONCLUSIVE for the loaded client's own lag
    assert "tool-call checks off by the profile" not in out, out  # the model's calls judged
    text = (profiles / "tiny-cpu.yaml").read_text()
    (profiles / "tiny-cpu-r2.yaml").write_text(
        text.replace("max_running_requests: 16", "max_running_requests: 8", 1)
    )  # the prefill's
    real_git(profiles.parent, "add", "-A")
    real_git(profiles.parent, "commit", "-q", "-m", "tiny-cpu r2")
    code, out = t.run(capsys, "deploy", "tiny-cpu-r2", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    code, out = t.run(capsys, "rollback", "--yes")
    assert code == 0, out
    assert _status(t, capsys) == ("HEALTHY", "tiny-cpu")  # the first revision, restored
    code, out = t.run(capsys, "watch", "--once")
    assert code == 0, out
    code, out = t.run(capsys, "stop", "--yes")
    assert code == 0, out
    code, out = t.run(capsys, "watch", "--once")
    assert code != 0 and "nothing to watch" in out, out
