"""The twin behind the real SMG (issue 43, item 2): the shipped `smg` profile deploys on a local
twin target with SMG 1.13.0 from its own venv in front, passes the end-to-end probe through it,
shows healthy in `status` with both workers listed, passes the smoke canary; changing routers is
a deploy like any other (baseline behind sglang-router 0.3.2 → smg → rollback to the baseline),
and `stop` leaves nothing running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from dsv4ops.profiles.routers import smg_python
from dsv4ops.routerkind import RouterKind
from testing.orchestrate import OrchEnv, cli, module_env, our_processes

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"

pytestmark = [pytest.mark.slow, pytest.mark.router]


@pytest.fixture(scope="module")
def smg_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    yield from module_env(tmp_path_factory)


@pytest.fixture
def env(smg_env: OrchEnv, _clean_environ: None, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    for k, v in smg_env.environ.items():
        monkeypatch.setenv(k, v)
    return smg_env


def test_deploy_probe_canary_rollback_and_stop_behind_the_real_smg(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(env, capsys, "deploy", "smg", "--dry-run")
    assert code == 0 and f"{smg_python()} -m smg.launch_router --pd-disaggregation" in out, out

    code, out, err = cli(env, capsys, "deploy", "baseline", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out + err
    code, out, err = cli(env, capsys, "deploy", "smg", "--yes", "--no-canary")
    assert code == 0, out + err
    assert "end-to-end probe" in out + err

    deployed = Journal(env.target).deployed().deployment()  # type: ignore[union-attr]
    assert deployed.router_kind is RouterKind.SMG
    router = deployed.component("router")
    assert router.argv[:3] == (str(smg_python()), "-m", "smg.launch_router")
    # SMG routes by model id: the deployment's served name gets through it
    chat = {
        "model": deployed.model_name,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
    }
    reply = httpx.post(router.client_url("/v1/chat/completions"), json=chat, timeout=30)
    assert reply.status_code == 200, reply.text[:300]

    code, out, err = cli(env, capsys, "status", "--json")
    assert code == 0, err
    row = next(c for c in out["components"] if c["name"] == "router")
    workers = row["workers"]  # SMG's /workers: the same url, worker_type and is_healthy
    assert out["healthy"] is True and sorted(w["type"] for w in workers) == ["decode", "prefill"]
    assert all(w["healthy"] for w in workers), workers

    code, out, err = cli(env, capsys, "canary", "--suite", "smoke", "--json")
    assert code in (0, 4), err  # PASS, or INCONCLUSIVE on a busy machine; never a FAIL
    assert out["verdict"] in ("PASS", "INCONCLUSIVE"), out

    code, out, err = cli(env, capsys, "rollback", "--yes")
    assert code == 0, out + err
    back = Journal(env.target).deployed().deployment()  # type: ignore[union-attr]
    assert back.profile_name == "baseline" and back.router_kind is RouterKind.SGLANG_ROUTER
    assert back.component("router").argv[2] == "sglang_router.launch_router"
    code, out, err = cli(env, capsys, "status", "--json")
    assert code == 0 and out["healthy"] is True, err

    code, out, err = cli(env, capsys, "stop", "--yes")
    assert code == 0, out + err
    assert our_processes(env) == []


def test_changing_routers_by_the_runbook_and_back(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """runbooks/router-change.md on the twin: onto SMG with its gated deploy, healthy behind
    it, the rules rendered for it, watch finding nothing; then the same runbook back to
    sglang-router 0.3.2."""
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(RUNBOOKS))
    for profile, kind in (("smg", RouterKind.SMG), ("baseline", RouterKind.SGLANG_ROUTER)):
        code = main(
            ["runbook", "run", "router-change", "--yes", "--var", f"profile={profile}"]
            + ["--target", env.target]
        )
        out, err = capfd.readouterr()
        assert code == 0, out + err
        deployed = Journal(env.target).deployed().deployment()  # type: ignore[union-attr]
        assert deployed.profile_name == profile and deployed.router_kind is kind
        # step 5 printed the rules for this router: behind SMG its own probe answers are left out
        assert ('path!~"/health|/liveness|/readiness"' in out) is (kind is RouterKind.SMG), out
        code = main(["watch", "--once", "--json", "--target", env.target])
        watched = capfd.readouterr().out
        assert code == 0, watched  # watch reads this router's metrics: nothing found
        assert main(["status", "--json", "--target", env.target]) == 0, capfd.readouterr()
        capfd.readouterr()
    assert main(["stop", "--yes", "--target", env.target]) == 0
    assert our_processes(env) == []


def test_a_target_without_smg_s_venv_is_refused_before_anything_stops(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = cli(env, capsys, "deploy", "baseline", "--yes", "--no-canary")
    assert code == 0, out + err
    missing = env.workdir / "no-smg-venv" / "bin" / "python"
    monkeypatch.setenv("DSV4OPS_SMG_PYTHON", str(missing))
    code, out, err = cli(env, capsys, "deploy", "smg", "--yes", "--no-canary")
    assert code == 1, out + err
    assert f"the router (SMG 1.13.0) runs from {missing}, which is not on the target" in err
    assert "stop router" not in out  # refused at preflight: the baseline kept serving
    code, out, err = cli(env, capsys, "status", "--json")
    assert code == 0 and out["healthy"] is True and out["deployed"]["profile"] == "baseline"
    code, out, err = cli(env, capsys, "stop", "--yes")
    assert code == 0, out + err
