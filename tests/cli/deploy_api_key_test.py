"""A router with an API key (issue 40, item 7), end to end: the twin behind the real
sglang-router 0.3.2 started with `--api-key`, the key named by the profile (`router.api_key.env`)
and read from this machine's environment. deploy (probe + smoke gate), `canary` and `watch --once`
get through; a request without the key gets 401; the key is in no output, journal or log file.
A deploy whose key is not set here is refused before anything changes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv, cli, commit_all, module_env

pytestmark = [pytest.mark.slow, pytest.mark.router]

KEY_ENV = "E2E_ROUTER_API_KEY"
KEY = "e2e-rk-4f9c2a7d1b8e6035"  # fixed: the test greps for it
KEYED = f"""\
schema_version: 1
extends: baseline
description: baseline behind a router that requires an API key
router:
  api_key:
    env: {KEY_ENV}
"""


# A runbook whose wait asks the router's admin route, which 0.3.2 answers only with the key.
RUNBOOK = """\
# Router key check

**Symptom.** none: the runbooks' HTTP checks reach a router that requires a key.

1. Check: the router lists its workers to a client with the key.
   ```step
   kind: wait
   until: http router /workers 200
   timeout: 15
   ```
"""


@pytest.fixture(scope="module")
def keyed_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    for env in module_env(tmp_path_factory):
        (env.profiles_dir / "keyed.yaml").write_text(KEYED)
        commit_all(env, "a router with an API key")
        yield env


@pytest.fixture
def env(keyed_env: OrchEnv, _clean_environ: None, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    for k, v in keyed_env.environ.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv(KEY_ENV, KEY)
    return keyed_env


def _files_holding(root: Path, text: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if text.encode() in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def test_a_keyed_router_deploys_is_canaried_and_watched_and_the_key_never_shows(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    code, out, err = cli(env, capsys, "deploy", "keyed", "--dry-run")
    said += [out, err]
    assert code == 0 and "--api-key '***'" in out, out  # the plan's router command

    code, out, err = cli(env, capsys, "deploy", "keyed", "--yes", "--accept-inconclusive-canary")
    said += [out, err]
    assert code == 0, out + err
    assert "end-to-end probe" in out + err

    router = Journal(env.target).deployed().deployment().component("router")  # type: ignore[union-attr]
    chat = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    # what sglang-router 0.3.2 enforces: its inference routes (docs/deploy.md)
    assert (
        httpx.post(router.client_url("/v1/chat/completions"), json=chat, timeout=30).status_code
        == 401
    )
    wrong = {"Authorization": "Bearer not-the-key"}
    assert (
        httpx.post(
            router.client_url("/v1/chat/completions"), json=chat, headers=wrong, timeout=30
        ).status_code
        == 401
    )
    right = {"Authorization": f"Bearer {KEY}"}
    reply = httpx.post(
        router.client_url("/v1/chat/completions"), json=chat, headers=right, timeout=30
    )
    assert reply.status_code == 200, reply.text[:300]
    assert httpx.get(router.client_url("/workers"), timeout=10).status_code == 401  # admin
    # ... and not its health and model routes, which dsv4ops's readiness waits use
    for path in ("/health", "/readiness", "/v1/models"):
        assert httpx.get(router.client_url(path), timeout=10).status_code == 200, path

    code, out, err = cli(env, capsys, "status")  # healthy, and the '***' is no drift
    said += [out, err]
    assert code == 0 and "drift" not in out.lower(), out + err

    code, out, err = cli(env, capsys, "canary", "--suite", "smoke", "--json")
    said += [json.dumps(out), err]
    assert code in (0, 4), err  # PASS, or INCONCLUSIVE on a busy machine; never a FAIL of 401s
    assert out["verdict"] in ("PASS", "INCONCLUSIVE"), out

    # a bare --url (a router dsv4ops did not start): the key from the variable named
    url = router.client_url()
    code, out, err = cli(
        env, capsys, "canary", "--suite", "smoke", "--json", "--url", url, "--api-key-env", KEY_ENV
    )
    said += [json.dumps(out), err]
    assert code in (0, 4) and out["verdict"] in ("PASS", "INCONCLUSIVE"), err
    code, out, err = cli(env, capsys, "canary", "--suite", "smoke", "--json", "--url", url)
    said += [json.dumps(out), err]
    assert code != 0 and out["verdict"] != "PASS", out  # no key named: the router's 401s

    code = main(["watch", "--once", "--json", "--prometheus-port", "0", "--target", env.target])
    out, err = capsys.readouterr()
    said += [out, err]
    rounds = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert code == 0, err + json.dumps(rounds[-1:])
    assert [p["status"] for p in rounds[0]["probes"]] == ["ok", "ok"]

    runbooks = env.root / "runbooks"
    runbooks.mkdir(exist_ok=True)
    (runbooks / "key-check.md").write_text(RUNBOOK)
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(runbooks))
    code, out, err = cli(env, capsys, "runbook", "run", "key-check", "--yes")
    said += [out, err]
    assert code == 0, out + err

    code, out, err = cli(env, capsys, "journal")
    said += [out, err]
    assert code == 0

    _no_drift_from_a_damaged_key_reference(env, capsys, monkeypatch)

    # The key unset here: refused before anything changes (what runs keeps running).
    monkeypatch.delenv(KEY_ENV)
    code, out, err = cli(env, capsys, "deploy", "keyed", "--yes", "--no-canary")
    said += [out, err]
    assert code == 1 and f"environment variable {KEY_ENV} is not set" in err, out + err
    assert "nothing was stopped or started" in err and "Traceback" not in err
    assert (
        httpx.post(
            router.client_url("/v1/chat/completions"), json=chat, headers=right, timeout=30
        ).status_code
        == 200
    )

    assert not [s for s in said if KEY in s]
    # the journal, the agent's state and logs, the components' logs, the twin's events
    assert (env.workdir / "logs" / "router.log").stat().st_size > 0  # what the grep covers
    assert _files_holding(env.root, KEY) == []


def _no_drift_from_a_damaged_key_reference(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record of a release before the commands hash (status computes it from what it reads)
    whose `key_from` is damaged: status does not read the key reference (it sends no key), so
    its hash lacks it and differs from the profile's render now. That is no evidence of drift:
    the deployed and rendered commands are the same, and status says only the damage."""
    op = Journal(env.target).deployed().op  # type: ignore[union-attr]
    record = env.workdir / "journal.jsonl"
    whole = record.read_bytes()
    lines = whole.decode().splitlines(keepends=True)
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            del rec["profile"]["commands_hash"]
            next(c for c in rec["components"] if c["name"] == "router")["key_from"] = "oops"
            lines[i] = json.dumps(rec, separators=(",", ":")) + "\n"
    try:
        record.write_text("".join(lines))
        monkeypatch.setenv("DSV4OPS_STATE_DIR", str(env.root / "old-record"))  # a fresh copy
        code, report, err = cli(env, capsys, "status", "--json")
        assert code == 2 and report["status"] == "NOT HEALTHY", err
        assert report["deployed"]["commands_hash"] is None
        assert [d["key"] for d in report["recorded_damage"]] == ["components.router.key_from"]
        assert report["drift"] == [] and report["not_shown"] == [], report
        assert all(c["alive"] and c["healthy"] for c in report["components"])
        code, out, err = cli(env, capsys, "status")
        assert code == 2 and "drift" not in out.lower(), out + err
        assert f"journal operation {op} records components.router.key_from = 'oops'" in out
    finally:
        record.write_bytes(whole)
        monkeypatch.setenv("DSV4OPS_STATE_DIR", env.environ["DSV4OPS_STATE_DIR"])
