"""The twin behind the real SMG (issue 43, item 2): the shipped `smg` profile deploys on a local
twin target with SMG 1.13.0 from its own venv in front, passes the end-to-end probe through it,
shows healthy in `status` with both workers listed, passes the smoke and abort-cascade canaries
(the cascade aborting by the rid SMG lets through); each router passes on the request ids
`RouterKind.request_ids` records for it; a SIGKILLed decode behind SMG is reported dead by
`status` and the canary; changing routers is a deploy like any other (baseline behind
sglang-router 0.3.2 → smg → rollback to the baseline), and `stop` leaves nothing running."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsv4ops.cli import main
from dsv4ops.deployment import Deployment
from dsv4ops.journal.store import Journal
from dsv4ops.profiles.routers import smg_python
from dsv4ops.routerkind import RequestIds, RouterKind
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
    baseline = Journal(env.target).deployed().deployment()  # type: ignore[union-attr]
    assert _request_ids_seen(baseline) == RouterKind.SGLANG_ROUTER.request_ids
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

    # what SMG passes on of a client's ids, observed on the decode, is what the code records
    assert _request_ids_seen(deployed) == RouterKind.SMG.request_ids == RequestIds(True, True)
    code, out, err = cli(env, capsys, "canary", "--suite", "abort-cascade", "--json")
    assert code in (0, 4) and out["verdict"] in ("PASS", "INCONCLUSIVE"), out  # 4: busy machine
    cascade = out["metrics"]["cascade"]
    assert cascade["abort_by"] == "rid" and cascade["abort_unaddressed"] == 0, cascade
    assert cascade["ended_by_abort_request"] == cascade["aborted_by_request"] > 0, cascade
    assert cascade["recovery_s"] is not None and cascade["wedge_detected_s"] is None, cascade
    assert any("aborted by rid: what SMG 1.13.0 lets reach" in r for r in out["reasons"]), out

    _decode_killed_behind_smg(env, capsys, deployed)

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


def _request_ids_seen(deployment: Deployment) -> RequestIds:
    """Stream a chat completion through the deployment's router with a `rid` in its body and an
    X-Request-ID header; read back from the decode (its `/_twin/state`, mid-stream) which of them
    reached it."""
    rid, header = f"ids-{time.monotonic_ns()}", f"hdr-{time.monotonic_ns()}"
    decode = deployment.component("decode").client_url("/_twin/state")
    seen: dict[str, object] = {}

    def watch() -> None:
        for _ in range(200):
            state = httpx.get(decode, timeout=5).json()
            if state["inflight_rids"]:
                seen.update(state)
                return
            time.sleep(0.02)

    body = {
        "model": deployment.model_name,
        "messages": [{"role": "user", "content": "count to a thousand"}],
        "max_tokens": 400,
        "stream": True,
        "rid": rid,
        "chat_template_kwargs": {"thinking": False},
    }
    watcher = threading.Thread(target=watch)
    watcher.start()
    url = deployment.component("router").client_url("/v1/chat/completions")
    with httpx.stream("POST", url, json=body, headers={"X-Request-ID": header}, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers.get("x-request-id") == header  # both echo it back
        for _ in r.iter_lines():
            pass
    watcher.join()
    assert seen, "the decode never showed the stream in flight"
    by_path = seen["x_request_id_by_path"]
    assert isinstance(by_path, dict)
    return RequestIds(
        chat_rid_kept=seen["inflight_rids"] == [rid],
        header_forwarded=by_path.get("/v1/chat/completions") == header,
    )


def _decode_killed_behind_smg(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], deployed: Deployment
) -> None:
    """SIGKILL the decode behind SMG: what SMG answers, and that status and the canary say the
    decode is dead (the rollback after this restarts the whole unit)."""
    rec = json.loads((env.workdir / "run" / "decode.json").read_text())
    os.killpg(rec["pgid"], signal.SIGKILL)
    chat = {
        "model": deployed.model_name,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "chat_template_kwargs": {"thinking": False},
    }
    router = deployed.component("router")
    reply = httpx.post(router.client_url("/v1/chat/completions"), json=chat, timeout=30)
    workers = httpx.get(router.client_url("/workers"), timeout=5).json()["workers"]
    # at once: 502 (the transport error) while SMG's /workers still lists the decode healthy:
    # its health checks fail it only after failure_threshold x interval_secs (3 x 10 s here)
    assert reply.status_code == 502 and "PD disaggregation request failed" in reply.text, reply.text
    assert all(w["is_healthy"] for w in workers), workers
    code, out, err = cli(env, capsys, "status", "--json")
    decode = next(c for c in out["components"] if c["name"] == "decode")
    assert code == 2 and out["status"] == "NOT HEALTHY" and out["healthy"] is False, out
    assert decode["alive"] is False and decode["exit_code"] == -signal.SIGKILL, decode
    assert "decode is not running (exit code -9), but smg is deployed" in out["drift"], out
    code, out, err = cli(env, capsys, "canary", "--suite", "smoke", "--json")
    assert code == 2 and out["verdict"] == "FAIL", out
    # SMG refuses every request at once, naming the prefill (its circuits opened on the
    # decode's failures); the dead-worker judge names the worker that is gone
    assert "No available prefill workers (all circuits open" in out["reasons"][0], out
    dead = deployed.component("decode").metrics_url
    assert any(f"worker {dead} is down" in r for r in out["reasons"]), out["reasons"]


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
