"""The target unreachable (its SSH port closed): `status` and `journal` answer from the local
cache of the journal of record and say how old it is; deploy, rollback and stop refuse with one
clear sentence and change nothing."""

from __future__ import annotations

import json

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment
from testing.ports import free_port
from testing.remote import SshdServer

pytestmark = pytest.mark.ssh
FAR = "twin-far"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args, "--target", FAR])
    out, err = capsys.readouterr()
    return code, out, err


def test_reads_answer_from_the_cache_and_mutations_refuse(
    env: OrchEnv, sshd: SshdServer, capsys: pytest.CaptureFixture[str]
) -> None:
    targets = env.profiles_dir / "targets.yaml"
    text = targets.read_text()
    local = text.split("targets:\n", 1)[1]
    ssh = (
        f"transport: ssh\n    ssh:\n      host: 127.0.0.1\n      port: {sshd.port}\n"
        f"      user: {sshd.user}\n      key: {sshd.client_key}\n"
        f"      known_hosts: {sshd.known_hosts}\n      trust_on_first_use: false"
    )
    far = local.replace("transport: local", ssh).replace(f"  {env.target}:", f"  {FAR}:", 1)
    targets.write_text(text + far)
    # A known-good deploy in this operator's own (pre-record) journal: merged on first contact.
    d = make_deployment("baseline")
    j = Journal(FAR)
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    code, out, err = _run(capsys, "journal", "--json")
    assert code == 0 and json.loads(out)["record"]["source"] == "target", err

    targets.write_text(text + far.replace(f"port: {sshd.port}", f"port: {free_port()}"))
    cached = j.path.read_bytes()
    code, out, err = _run(capsys, "status", "--json")
    st = json.loads(out)
    assert code == 4 and st["reachable"] is False and st["healthy"] is False  # UNKNOWN
    assert st["status"] == "UNKNOWN" and st["exit"] == 4
    assert st["record"]["source"] == "cache" and st["record"]["age_s"] >= 0
    assert "cannot connect" in st["record"]["error"]
    assert st["deployed"]["op"] == op and st["deployed"]["known_good"]
    code, out, _ = _run(capsys, "status")
    assert code == 4 and "UNKNOWN (not reachable)" in out and "TARGET UNREACHABLE" in out
    assert "s ago" in out and "last recorded deployment: baseline" in out
    code, out, _ = _run(capsys, "journal")
    assert code == 0 and "TARGET UNREACHABLE" in out and "synced" in out and op in out

    for mutation in (["deploy", "baseline", "--no-canary"], ["rollback"], ["stop"]):
        code, out, err = _run(capsys, *mutation, "--yes")
        assert code == 1, (mutation, out, err)
        assert "cannot connect" in err and "nothing was changed" in err, (mutation, err)
        assert "Traceback" not in err
    assert j.path.read_bytes() == cached
