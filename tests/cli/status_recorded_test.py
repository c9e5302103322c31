"""`dsv4ops status` on a running twin whose journal of record holds a damaged recorded setting
(docs/deploy.md, "Recorded settings"). Status is read-only and what an operator runs first in
an incident: it names the damage as a finding, in the words deploy, rollback and stop refuse
with, and shows everything it observes. It exits 2, never HEALTHY. Its own twin module: the
record is edited on the target, as an editor would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv, our_processes

pytestmark = [pytest.mark.slow, pytest.mark.router]


def _edit(record: Path, op: str, edit: dict[str, object]) -> None:
    """Set fields of `op`'s begin record: `components.<name>.<key>` or `flags.<key>`."""
    lines = record.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            for where, value in edit.items():
                part, name, *key = where.split(".")
                if part == "flags":
                    rec["profile"]["flags"][name] = value
                else:
                    next(c for c in rec["components"] if c["name"] == name)[key[0]] = value
            lines[i] = json.dumps(rec, separators=(",", ":")) + "\n"
    record.write_text("".join(lines))


def _status(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, int, dict]:  # type: ignore[type-arg]
    code = main(["status", "--target", env.target])
    out = capsys.readouterr().out
    json_code = main(["status", "--json", "--target", env.target])
    return code, out, json_code, json.loads(capsys.readouterr().out)


def _watch(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict], str]:  # type: ignore[type-arg]
    args = ["watch", "--once", "--json", "--interval", "0.5", "--probe-every", "1"]
    code = main([*args, "--target", env.target])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def _operator(env: OrchEnv, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """An operator new to the target (their own cache of its record)."""
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(env.root / name))


def test_status_on_a_running_twin_names_the_damage_and_shows_what_runs(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = baseline_running
    deployed = Journal(env.target).deployed()
    assert deployed is not None
    op = deployed.op
    record = env.workdir / "journal.jsonl"
    whole = record.read_bytes()
    try:
        _damaged_then_mended(env, capsys, monkeypatch, op, record, whole)
    finally:
        record.write_bytes(whole)  # the module's teardown stops the unit


def _damaged_then_mended(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    op: str,
    record: Path,
    whole: bytes,
) -> None:
    _edit(record, op, {"components.decode.stop_grace_s": "abc", "flags.decode_buckets": "abc"})
    _operator(env, monkeypatch, "bob")

    code, out, json_code, report = _status(env, capsys)
    assert (code, json_code) == (2, 2), out
    lines = out.splitlines()
    assert lines[0] == f"target {env.target}: NOT HEALTHY", out
    assert any(ln.startswith("deployed: baseline @ ") and op in ln for ln in lines), out
    for name in ("prefill", "decode"):
        row = next(ln for ln in lines if ln.startswith(name + " "))
        assert " up " in row and " 200 " in row and "buckets " in row, row
    router = next(ln for ln in lines if ln.startswith("router "))
    assert "readiness 200" in router, router
    assert (
        f"damaged record: journal operation {op} records components.decode.stop_grace_s = 'abc', "
        "which is not a number of seconds above 0" in out
    ), out
    assert f"damaged record: journal operation {op} records flags.decode_buckets = 'abc'" in out
    hint = f"  hint: mend `stop_grace_s` of the decode in `components` of the begin record of {op}"
    assert hint in out, out
    assert "not shown:" not in out and "drift:" not in out  # neither field is one status needs
    assert (report["status"], report["exit"], report["healthy"]) == ("NOT HEALTHY", 2, False)
    assert all(c["alive"] and c["healthy"] for c in report["components"]), report["components"]
    assert report["drift"] == [] and report["not_shown"] == [] and report["pd_timeouts"]
    assert [(d["op"], d["key"], d["value"]) for d in report["recorded_damage"]] == [
        (op, "components.decode.stop_grace_s", "abc"),
        (op, "flags.decode_buckets", "abc"),
    ]
    assert all(d["fix"].startswith("mend `") for d in report["recorded_damage"])

    # Watch judges by the recorded buckets: it cannot watch without them, and says why.
    code, rounds, err = _watch(env, capsys)
    assert code == 4 and rounds[-1]["exit"] == 4, err
    assert f"journal operation {op} records flags.decode_buckets = 'abc'" in rounds[-1]["error"]

    # A mutating verb still refuses, naming it, and stops nothing.
    assert main(["stop", "--yes", "--target", env.target]) == 1
    assert "components.decode.stop_grace_s = 'abc'" in capsys.readouterr().err
    assert len(our_processes(env)) == 3

    # Watch stops nothing: it does not read the grace, watches, and names the damage.
    record.write_bytes(whole)
    _edit(record, op, {"components.decode.stop_grace_s": "abc"})
    _operator(env, monkeypatch, "erin")
    code, rounds, err = _watch(env, capsys)
    assert code == 0 and rounds[-1]["worst"] == "ok", err + json.dumps(rounds[-1:])
    assert (
        "note: damaged record (watch does not need it): journal operation "
        f"{op} records components.decode.stop_grace_s = 'abc'" in err
    ), err
    assert hint in err and "Traceback" not in err

    # A field status needs (the decode's port): what it observes without it, and what not.
    record.write_bytes(whole)
    _edit(record, op, {"components.decode.port": "x"})
    _operator(env, monkeypatch, "carol")
    code, out, json_code, report = _status(env, capsys)
    assert (code, json_code) == (2, 2), out
    assert out.splitlines()[0] == f"target {env.target}: NOT HEALTHY", out
    assert all(c["alive"] and c["pid"] for c in report["components"]), report["components"]
    assert report["not_shown"] and "(components.decode.port is damaged)" in out, out
    assert "not shown: each component's health" in out
    assert [d["key"] for d in report["recorded_damage"]] == ["components.decode.port"]

    # Mended: healthy again.
    record.write_bytes(whole)
    _operator(env, monkeypatch, "dave")
    code, out, json_code, report = _status(env, capsys)
    assert (code, json_code) == (0, 0), out
    assert report["recorded_damage"] == [] and report["status"] == "HEALTHY"
