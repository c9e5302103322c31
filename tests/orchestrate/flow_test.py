"""Deploy, status, redeploy another profile, rollback, stop: local executor, twin + real router."""

from __future__ import annotations

import sys

import pytest

from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.model import process_spec
from dsv4ops.profiles import load_profile
from dsv4ops.remote import LocalExecutor, Supervisor
from testing.orchestrate import OrchEnv, cli, our_processes, read_events

pytestmark = [pytest.mark.slow, pytest.mark.router]


def test_deploy_status_redeploy_rollback_stop(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(
        env,
        capsys,
        "deploy",
        "baseline",
        "--yes",
        "--json",
        "--canary-duration",
        "2",
        "--accept-inconclusive-canary",
    )  # gated: rollback offers it
    assert code == 0, err
    assert out["status"] == "SUCCEEDED" and out["profile"] == "baseline"
    titles = [s["title"] for s in out["steps"]]
    assert (
        titles.index("start prefill") < titles.index("start decode") < titles.index("start router")
    )
    assert any("probe" in t for t in titles)
    assert all("ok" in line for line in out["probe"])

    code, st, err = cli(env, capsys, "status", "--json")
    assert code == 0, err
    assert st["healthy"], st
    assert st["deployed"]["profile"] == "baseline" and st["deployed"]["commit"]
    comps = {c["name"]: c for c in st["components"]}
    assert comps["decode"]["version"] == "0.5.23"
    assert comps["decode"]["captured_buckets"][-1] == 96
    assert comps["decode"]["running_requests"] == 0
    assert comps["router"]["readiness"] == 200
    assert {w["type"] for w in comps["router"]["workers"]} == {"prefill", "decode"}
    first_pids = {n: c["pid"] for n, c in comps.items()}

    code, out, err = cli(env, capsys, "deploy", "buckets-step4", "--yes", "--json", "--no-canary")
    assert code == 0, err
    code, st, _ = cli(env, capsys, "status", "--json")
    assert st["deployed"]["profile"] == "buckets-step4" and st["healthy"], st
    comps = {c["name"]: c for c in st["components"]}
    step4 = load_profile(env.profiles_dir / "buckets-step4.yaml").decode_buckets
    assert comps["decode"]["captured_buckets"] == list(step4) and 44 in step4
    assert all(comps[n]["pid"] != first_pids[n] for n in first_pids)

    code, out, err = cli(env, capsys, "rollback", "--yes", "--json")
    assert code == 0, err
    assert out["kind"] == "rollback" and out["profile"] == "baseline"
    code, st, _ = cli(env, capsys, "status", "--json")
    assert st["deployed"]["profile"] == "baseline" and st["deployed"]["kind"] == "rollback"
    assert st["healthy"] and st["drift"] == [], st
    assert len(our_processes(env)) == 3

    # Every deploy started the prefill, waited for it, then started the decode (twin event log).
    events = [e for e in read_events(env) if e.get("event") in ("started", "ready")]
    seq = [(e["role"], e["event"]) for e in events]
    assert seq.count(("decode", "started")) == 3  # baseline, buckets-step4, rollback
    for i, item in enumerate(seq):
        if item == ("decode", "started"):
            assert ("prefill", "ready") in seq[:i][-3:], seq

    # A component restarted outside the tool shows up as drift.
    sup = Supervisor(LocalExecutor(), str(env.workdir), python=sys.executable)
    deployed = Journal(env.target).deployed()
    assert deployed is not None  # the baseline runs
    decode = deployed.deployment().component("decode")
    sup.stop("decode", grace_s=5)
    sup.start(process_spec(decode))
    sup.wait_http(decode.url("/health"), timeout_s=30, proc_name="decode")
    code, st, _ = cli(env, capsys, "status", "--json")
    assert not st["healthy"]
    assert any("decode was restarted outside dsv4ops" in d for d in st["drift"]), st["drift"]

    code, out, err = cli(env, capsys, "stop", "--yes", "--json")
    assert code == 0, err
    assert our_processes(env) == []
    code, st, _ = cli(env, capsys, "status", "--json")
    assert st["deployed"] is None and not any(c["alive"] for c in st["components"])

    ops = Journal(env.target).operations()
    assert [(o.kind.value, o.status.value) for o in ops] == [
        ("deploy", "SUCCEEDED"),
        ("deploy", "SUCCEEDED"),
        ("rollback", "SUCCEEDED"),
        ("stop", "SUCCEEDED"),
    ]
    code, text, _ = cli(env, capsys, "journal")
    assert "rollback" in text and "buckets-step4" in text
