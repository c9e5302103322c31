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


def _argv_edit(record: Path, op: str, name: str, flag: str, value: str) -> dict[str, object]:
    """The `_edit` that sets `flag`'s value in component `name`'s recorded argv."""
    for line in record.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            argv = list(next(c for c in rec["components"] if c["name"] == name)["argv"])
            argv[argv.index(flag) + 1] = value
            return {f"components.{name}.argv": argv}
    raise AssertionError(f"no begin record of {op}")


def test_watch_names_a_damaged_field_it_needs_in_words_and_exit_4(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an operator sees when watch cannot watch: the operation, the key, the way back, on
    stderr, never a traceback; exit 4 (UNDECIDED: it could not look) with --once."""
    env = baseline_running
    op = Journal(env.target).deployed().op  # type: ignore[union-attr]
    record = env.workdir / "journal.jsonl"
    whole = record.read_bytes()
    args = ["watch", "--once", "--interval", "0.5", "--probe-every", "1", "--target", env.target]
    try:
        _edit(record, op, {"flags.decode_buckets": "abc"})
        _operator(env, monkeypatch, "gina")
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 4 and not out, out + err
        assert (
            f"error: journal operation {op} records flags.decode_buckets = 'abc', which is not "
            in err
        ), err
        assert f"hint: mend `profile.flags` of the begin record of {op}" in err, err
        assert "or redeploy the profile, which records it afresh: `dsv4ops deploy " in err, err
        assert "Traceback" not in err and "internal error" not in err, err

        # A record of a release before metrics_port (no second port): the router's Prometheus
        # port is read off its argv, where a value that is no port was a crash (exit 3).
        record.write_bytes(whole)
        edit = _argv_edit(record, op, "router", "--prometheus-port", "9x")
        _edit(record, op, {**edit, "components.router.metrics_port": None})
        _edit(record, op, {"components.router.ports": []})
        _operator(env, monkeypatch, "hank")
        code = main(args)
        err = capsys.readouterr().err
        key = "components.router.argv --prometheus-port = '9x', which is not a port number"
        assert code == 4 and f"error: journal operation {op} records {key}" in err, err
        assert f"hint: mend `argv` of the router in `components` of the begin record of {op}" in err
        assert "Traceback" not in err and "internal error" not in err, err
        code, out, json_code, report = _status(env, capsys)  # status names it too
        assert (code, json_code) == (2, 2) and key in out, out
        assert [d["key"] for d in report["recorded_damage"]] == [
            "components.router.argv --prometheus-port"
        ]
        assert len(our_processes(env)) == 3
    finally:
        record.write_bytes(whole)


def test_watch_with_a_damaged_stop_grace_keeps_its_probe_stream(
    baseline_running: OrchEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Watch stops nothing, so a damaged grace is only named; its probe stream (a wedge found
    within 3 s of the last token) was lost to it without a word."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.watch import open_watch, recorded_notes

    env = baseline_running
    op = Journal(env.target).deployed().op  # type: ignore[union-attr]
    record = env.workdir / "journal.jsonl"
    whole = record.read_bytes()
    try:
        _edit(record, op, {"components.decode.stop_grace_s": "abc"})
        _operator(env, monkeypatch, "ivan")
        session = open_target(env.target, verb="watch", http_only=True, read_only=True)
        try:
            watcher = open_watch(session, probe_every_s=1.0)
            assert watcher.stream is not None
            watcher.stream.close()
            assert [e.key for e in recorded_notes(session)] == ["components.decode.stop_grace_s"]
        finally:
            session.close()
    finally:
        record.write_bytes(whole)


DIAGNOSE = """\
# Diagnose

**When.** a test: the bundle of a target whose record deploy, rollback and stop refuse.

1. Diagnostics: keep what the target shows.
   ```step
   kind: diagnostics
   ```
"""


def _bundle(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path | None]:
    code = main(["runbook", "run", "diagnose", "--yes", "--target", env.target])
    out, err = capsys.readouterr()
    at = [ln.split("diagnostics bundle: ", 1)[1] for ln in out.splitlines() if "bundle: " in ln]
    return code, out + err, Path(at[0].strip()) if at else None


def test_a_diagnostics_bundle_is_collected_from_a_damaged_record_and_names_the_damage(
    baseline_running: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A diagnosis tool works on a damaged box: the bundle is collected (it aborted the run),
    the damaged field noted in its manifest with the way back, and the servers read when what
    the bundle needs of them is whole."""
    env = baseline_running
    op = Journal(env.target).deployed().op  # type: ignore[union-attr]
    (tmp_path / "diagnose.md").write_text(DIAGNOSE)
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(tmp_path))
    record = env.workdir / "journal.jsonl"
    whole = record.read_bytes()
    try:
        _edit(record, op, {"components.decode.stop_grace_s": "abc"})
        _operator(env, monkeypatch, "jane")
        code, text, bundle = _bundle(env, capsys)
        assert code == 0 and bundle is not None, text
        assert "Traceback" not in text
        files = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
        for part in ("prefill", "decode", "router"):  # the grace is not what it reads them by
            assert {f"{part}/server_info.json", f"{part}/log-tail.txt"} <= files, files
        noted = [i for i in _manifest(bundle) if "damaged record" in str(i.get("missing"))]
        assert len(noted) == 1, _manifest(bundle)
        assert f"journal operation {op} records components.decode.stop_grace_s = 'abc'" in str(
            noted[0]["missing"]
        )
        assert "hint: mend `stop_grace_s` of the decode in `components`" in str(noted[0]["missing"])

        # A field it needs (the decode's port): still a bundle, the servers' HTTP said missing.
        _mend(record, whole)
        _edit(record, op, {"components.decode.port": "x"})
        _operator(env, monkeypatch, "kurt")
        code, text, bundle = _bundle(env, capsys)
        assert code == 0 and bundle is not None, text
        files = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
        assert {"decode/log-tail.txt", "journal-tail.jsonl", "deployment.json"} <= files, files
        assert not any(f.endswith("server_info.json") for f in files), files
        items = _manifest(bundle)
        assert any("components.decode.port = 'x'" in str(i.get("missing")) for i in items), items
        why = "the recorded deployment cannot be rebuilt (components.decode.port is damaged)"
        assert {"what": "decode /server_info and /metrics", "file": None, "missing": why} in items
    finally:
        _mend(record, whole)


def _manifest(bundle: Path) -> list[dict[str, object]]:
    items: list[dict[str, object]] = json.loads((bundle / "MANIFEST.json").read_text())["items"]
    return items


def _mend(record: Path, whole: bytes) -> None:
    """The record as it was, with the records written since (the runs') kept after it."""
    since = record.read_bytes().splitlines(keepends=True)[len(whole.splitlines()) :]
    record.write_bytes(whole + b"".join(since))
