"""The same orchestration through the SSH executor against a real OpenSSH server on 127.0.0.1
(known_hosts checked): deploy, status, redeploy another profile, rollback; and a connection that
drops mid-deploy: a ~3 s outage is ridden out and the deploy lands; with no budget for that the
deploy fails, status explains and a re-run recovers."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from dsv4ops.constants import SSH_RECONNECT_S
from dsv4ops.journal.records import Kind
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.restore import fallback_for, rebuild, rollback_target
from dsv4ops.orchestrate.status import gather_status
from dsv4ops.orchestrate.status_report import StatusReport
from dsv4ops.orchestrate.timeouts import Timeouts
from dsv4ops.profiles import get_target
from dsv4ops.remote import Supervisor
from dsv4ops.usecases import render as R
from testing.orchestrate import OrchEnv, our_processes
from testing.remote import SshdServer

pytestmark = [pytest.mark.slow, pytest.mark.router, pytest.mark.ssh]
JOURNAL = "twin-over-ssh"


class SshCommand:
    """What one CLI invocation composes, but with the SSH executor (a fresh connection each)."""

    def __init__(
        self,
        env: OrchEnv,
        sshd: SshdServer,
        progress: Callable[[str], None] | None = None,
        reconnect_s: float = SSH_RECONNECT_S,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.target = get_target(env.target)  # rendering only; processes start over SSH
        self.executor = sshd.executor()
        self.sup = Supervisor(
            self.executor,
            str(env.workdir),
            python=sys.executable,
            reconnect_s=reconnect_s,
            notify=notify,
        )
        self.journal = Journal(JOURNAL)
        self.op = Operator(
            self.sup,
            self.journal,
            host=f"127.0.0.1:{sshd.port} (ssh)",
            progress=progress or (lambda _l: None),
            model="deepseek-v4-flash",
            timeouts=Timeouts(
                ready_s={"prefill": 30, "decode": 30, "router": 30},
                stop_grace_cap_s=8,
                drain_s=5,
                probe_request_s=20,
            ),
        )

    def deploy(self, profile: str, **kw: Any) -> Outcome:
        new = R.deployment_for(profile, self.target)
        fb = fallback_for(self.journal, R.render_at_commit(self.target))
        return self.op.deploy(new, fallback=fb, run_canary=False, **kw)

    def rollback(self) -> Outcome:
        # The deploys here run no canary gate (run_canary=False), so none is known-good
        # (journal/knowngood.py): name the first baseline deploy, as `rollback --to ID` does.
        first = next(
            o
            for o in self.journal.operations()
            if o.kind is Kind.DEPLOY and o.profile_name == "baseline"
        )
        target_op = rollback_target(self.journal, first.op)
        dep, _ = rebuild(target_op, R.render_at_commit(self.target))
        return self.op.deploy(dep, kind=Kind.ROLLBACK, run_canary=False)

    def status(self) -> StatusReport:
        return gather_status(
            self.sup, self.journal, target=JOURNAL, render_now=R.render_now(self.target)
        )

    def close(self) -> None:
        self.executor.close()


def run(
    env: OrchEnv,
    sshd: SshdServer,
    action: str,
    *args: Any,
    progress: Callable[[str], None] | None = None,
    reconnect_s: float = SSH_RECONNECT_S,
    notify: Callable[[str], None] | None = None,
    **kw: Any,
) -> Any:
    cmd = SshCommand(env, sshd, progress, reconnect_s, notify)
    try:
        return getattr(cmd, action)(*args, **kw)
    finally:
        cmd.close()


def test_deploy_status_redeploy_rollback_over_ssh(env: OrchEnv, sshd: SshdServer) -> None:
    out = run(env, sshd, "deploy", "baseline")
    assert out.ok, out.message
    st = run(env, sshd, "status")
    assert st["healthy"] and st["deployed"]["profile"] == "baseline", st
    assert {c["name"]: c["alive"] for c in st["components"]} == {
        "prefill": True,
        "decode": True,
        "router": True,
    }

    out = run(env, sshd, "deploy", "buckets-step4")
    assert out.ok, out.message
    out = run(env, sshd, "rollback")
    assert out.ok and out.kind == "rollback" and out.profile == "baseline", out.message
    st = run(env, sshd, "status")
    assert st["healthy"] and st["deployed"]["profile"] == "baseline" and st["drift"] == [], st
    assert len(our_processes(env)) == 3


def _deploy_through_an_outage(
    env: OrchEnv, sshd: SshdServer, profile: str, **kw: Any
) -> tuple[Outcome, list[threading.Thread]]:
    """Deploy `profile` while SSH is cut for ~3 s from the moment the decode has started (its
    readiness wait is then in flight): every session is killed as soon as it appears."""
    stop_dropping = threading.Event()

    def keep_dropping() -> None:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not stop_dropping.is_set():
            sshd.drop_connections()
            time.sleep(0.02)

    outage: list[threading.Thread] = []

    def progress(line: str) -> None:
        if "start decode" in line and line.lstrip().startswith("ok") and not outage:
            t = threading.Thread(target=keep_dropping)
            t.start()
            outage.append(t)

    try:
        out = run(env, sshd, "deploy", profile, progress=progress, **kw)
    finally:
        stop_dropping.set()
        for t in outage:
            t.join()
    return out, outage


def test_a_three_second_outage_mid_deploy_is_ridden_out(env: OrchEnv, sshd: SshdServer) -> None:
    if Journal(JOURNAL).deployed() is None:
        assert run(env, sshd, "deploy", "baseline").ok
    heard: list[str] = []
    out, outage = _deploy_through_an_outage(env, sshd, "buckets-step4", notify=heard.append)
    assert outage and out.ok, out.message
    assert any("connection lost" in h for h in heard), heard
    assert any("connection is back" in h for h in heard), heard
    st = run(env, sshd, "status")
    assert st["healthy"] and st["deployed"]["profile"] == "buckets-step4", st
    assert st["attention"] == [] and len(our_processes(env)) == 3


def test_connection_drop_mid_deploy_then_status_and_rerun_recover(
    env: OrchEnv, sshd: SshdServer
) -> None:
    """With no budget to ride it out (`ssh.reconnect_s: 0`), the outage fails the deploy."""
    if Journal(JOURNAL).deployed() is None:
        assert run(env, sshd, "deploy", "baseline").ok
    out, outage = _deploy_through_an_outage(env, sshd, "buckets-step4", reconnect_s=0)
    assert outage and not out.ok
    assert "connection dropped" in out.message or "cannot connect" in out.message, out.message

    st = run(env, sshd, "status")
    if out.status != "ROLLED_BACK":
        # The outage outlasted the automatic rollback: status says what is unknown and how to fix.
        assert not st["healthy"]
        assert st["attention"], st
    out2 = run(env, sshd, "deploy", "baseline")
    assert out2.ok, out2.message
    st = run(env, sshd, "status")
    assert st["healthy"] and st["lock"] is None and st["attention"] == [], st
    assert len(our_processes(env)) == 3
    assert Journal(JOURNAL).in_flight() == []
