"""Hostile journals through the real CLI and the real agent (issue 39): a forged index is rebuilt,
never a crash; a garbled record line is named file:line and the rest stays readable; an
operation id begun twice is flagged and never hides a known-good; a record that lost history
is never read as whole (exit 4), `--merge` works as the first command, and the divergence heals
by itself once the record holds every record again."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.cli import main
from dsv4ops.journal import index, recordfile
from dsv4ops.journal.records import RECORD_VERSION, Kind, Status
from dsv4ops.journal.store import Journal
from testing.cli import EVIL, SHOWN, printable
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment


def _stops(n: int, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(n):
        assert main(["stop", "--yes"]) == 0  # nothing runs: each is a journaled stop
    capsys.readouterr()


def _listing(capsys: pytest.CaptureFixture[str], code: int = 0) -> dict[str, Any]:
    assert main(["journal", "--json", "--limit", "0"]) == code
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _ids(listing: dict[str, Any]) -> list[str]:
    return [e["id"] for e in listing["entries"]]


def _cache(fresh_target: OrchEnv) -> Path:
    return fresh_target.state_dir / "journal" / f"{fresh_target.target}.jsonl"


def _meta_state(db: Path) -> dict[str, Any]:
    with contextlib.closing(sqlite3.connect(db)) as c:
        got: dict[str, Any] = json.loads(
            c.execute("SELECT v FROM meta WHERE k = 'state'").fetchone()[0]
        )
    return got


@pytest.mark.parametrize(
    "field,value,rehashed",
    [
        ("merges", [5], False),
        ("records", 99, False),
        ("skipped", [1], False),
        ("merged", ["s-x"], False),
        # Forged with its sha256 made to match (it is no MAC): the offset that holds no merge
        # record is found when read and the index rebuilt all the same.
        ("merges", [5], True),
    ],
)
def test_a_forged_index_is_rebuilt_with_a_warning_and_does_not_persist(
    fresh_target: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: object,
    rehashed: bool,
) -> None:
    _stops(3, capsys)
    ids = _ids(_listing(capsys))
    db = Path(f"{_cache(fresh_target)}.sqlite")
    with contextlib.closing(sqlite3.connect(db)) as c:
        meta = dict(c.execute("SELECT k, v FROM meta"))
        state = json.loads(meta["state"])
        state[field] = value
        forged = json.dumps(state)
        c.execute("UPDATE meta SET v = ? WHERE k = 'state'", (forged,))
        if rehashed:  # the attacker also fixed up the sha256 (it is no MAC): read back, it fails
            digest = index.sha(forged)
            c.execute("UPDATE meta SET v = ? WHERE k = 'digest'", (digest,))
        c.commit()

    assert main(["journal", "--json", "--limit", "0"]) == 0  # never 3 (internal error)
    out, err = capsys.readouterr()
    assert _ids(json.loads(out)) == ids and json.loads(out)["skipped_lines"] == []
    assert "index" in err and "rebuilt from the journal" in err, err
    assert main(["status"]) == 2  # STOPPED, as the journal says
    assert main(["stop", "--yes"]) == 0  # a later mutating command
    capsys.readouterr()
    later = _listing(capsys)
    assert len(_ids(later)) == 4 and _ids(later)[:3] == ids
    assert _meta_state(db)[field] != value  # written anew


@pytest.mark.parametrize("damage", ["garbage", "cut"])
def test_a_damaged_sqlite_cache_is_rebuilt_with_a_warning(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    _stops(3, capsys)
    ids = _ids(_listing(capsys))
    db = Path(f"{_cache(fresh_target)}.sqlite")
    with contextlib.closing(sqlite3.connect(db)) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
    raw = db.read_bytes()
    # Garbage over its pages (its header kept: SQLite opens it, then finds it malformed), or
    # the file cut in half (a full disk, a bad copy).
    db.write_bytes(raw[:100] + b"\xa5" * (len(raw) - 100) if damage == "garbage" else raw[:2048])

    assert main(["journal", "--json", "--limit", "0"]) == 0  # never 3, never a traceback
    out, err = capsys.readouterr()
    assert _ids(json.loads(out)) == ids
    assert f"the journal's index {db} did not match the journal (SQLite:" in err, err
    assert "Traceback" not in err
    assert main(["status"]) == 2
    _, err = capsys.readouterr()
    assert "did not match" not in err  # rebuilt once: the next command reads it quietly
    assert _meta_state(db)["ops"] == 3


def _garble_first_begin(path: Path) -> int:
    """Three non-UTF-8 bytes inside the first `begin` record (the same length); its line."""
    lines = path.read_bytes().splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if b'"type":"begin"' in ln)
    at = lines[i].index(b'"user":"') + len(b'"user":"')
    lines[i] = lines[i][:at] + b"\xff\xfe\xfd" + lines[i][at + 3 :]
    path.write_bytes(b"".join(lines))
    return i + 1


def test_a_garbled_record_line_is_named_and_the_rest_stays_readable(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stops(3, capsys)
    ids = _ids(_listing(capsys))
    record = fresh_target.workdir / "journal.jsonl"
    whole = record.read_bytes()
    line = _garble_first_begin(record)
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(fresh_target.root / "bob"))  # an operator new to it
    bob_cache = fresh_target.root / "bob" / "journal" / f"{fresh_target.target}.jsonl"

    assert main(["journal", "--json", "--limit", "0"]) == 0
    out, err = capsys.readouterr()
    assert _ids(json.loads(out)) == ids[1:]  # every operation it can read
    assert f"{bob_cache}:{line}: not UTF-8" in err and f"sed -n {line}p {bob_cache}" in err, err
    assert any(f":{line}: not UTF-8" in w for w in json.loads(out)["warnings"])
    assert main(["status"]) == 2  # STOPPED, from what it can read: the table is shown
    out, err = capsys.readouterr()
    assert "target twin-test: STOPPED" in out and f":{line}: not UTF-8" in err
    assert main(["status", "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert any(f":{line}: not UTF-8" in w for w in report["journal_warnings"]), report
    # A deploy would decide known-good on a history it cannot read whole: refused, named.
    assert main(["deploy", "baseline", "--yes"]) == 1
    err = capsys.readouterr().err
    assert f"{bob_cache}:{line}: not UTF-8" in err and "nothing was changed" in err, err
    assert "hint: look at it" in err and "Traceback" not in err
    assert f"`dsv4ops journal --target {fresh_target.target}`" in err, err  # names the target
    assert _ids(_listing(capsys)) == ids[1:]  # nothing was journaled
    # The brake always works: a stop takes nothing known-good into account; the line is named.
    assert main(["stop", "--yes"]) == 0
    assert f":{line}: not UTF-8" in capsys.readouterr().err
    assert len(_ids(_listing(capsys))) == len(ids)  # the stop is journaled
    record.write_bytes(whole + record.read_bytes()[len(whole) :])  # mended by hand
    assert main(["stop", "--yes"]) == 0
    capsys.readouterr()
    listing = _listing(capsys)
    assert _ids(listing)[:3] == ids and len(_ids(listing)) == 5 and listing["warnings"] == []


def _known_good(j: Journal, name: str) -> str:
    d = make_deployment(name)
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def test_a_duplicate_operation_id_is_flagged_and_never_hides_a_known_good(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    # written into the cache, merged into the record by the next read
    j = Journal(fresh_target.target)
    first = _known_good(j, "baseline")
    _known_good(j, "buckets-step4")
    before = _listing(capsys)
    assert before["entries"][0]["known_good"]
    (gate,) = before["entries"][0]["gates"]  # its gate, as data (journal/gates.py)
    h = make_deployment("baseline").commands_hash
    assert (gate["suite"], gate["verdict"], gate["commands_hash"]) == ("smoke", "PASS", h)
    assert main(["journal"]) == 0 and f"smoke PASS {h[:8]}" in capsys.readouterr().out
    record = fresh_target.workdir / "journal.jsonl"
    start = len(record.read_bytes().splitlines())
    # Another operation's records appended under the known-good's id: a failed deploy.
    impostor: list[dict[str, Any]] = [
        {"type": "begin", "kind": "deploy", "user": "mallory", "profile": {"name": "evil"}},
        {"type": "status", "status": "RUNNING"},
        {"type": "step", "name": "canary: smoke", "phase": "failed", "detail": "verdict FAIL"},
        {"type": "status", "status": "FAILED", "running": ""},
    ]
    stamp: dict[str, Any] = {"v": RECORD_VERSION, "ts": "2026-12-06T00:00:00Z", "op": first}
    recordfile.append_bytes(
        str(record), b"".join(recordfile.encode({**stamp, **r}) for r in impostor)
    )

    after = _listing(capsys)
    (entry,) = [e for e in after["entries"] if e["id"] == first]
    assert entry["known_good"] and entry["status"] == "SUCCEEDED" and entry["who"] != "mallory"
    want = f"operation id {first} is begun again at line {start + 1}"
    assert any(want in w for w in after["warnings"]), after["warnings"]
    assert main(["journal"]) == 0
    assert f"line(s) {start + 1}-{start + 4}" in capsys.readouterr().err
    code = main(["rollback", "--dry-run", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0 and plan["op"] == first, plan  # still offered: it is the earlier one


def _cut(record: Path) -> bytes:
    full = record.read_bytes()
    lines = full.splitlines(keepends=True)
    record.write_bytes(b"".join(lines[: len(lines) // 2]))
    return full


def test_a_shorter_record_is_never_read_as_whole(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    _stops(2, capsys)
    both = _ids(_listing(capsys))
    _cut(fresh_target.workdir / "journal.jsonl")
    listing = _listing(capsys, code=4)  # UNDECIDED: the history shown is not all of it
    assert listing["record"]["diverged"]["missing_on_target"] > 0
    assert _ids(listing) != both
    assert main(["status"]) == 4  # UNKNOWN: what the short record says runs may be old
    assert "HISTORY DIVERGED" in capsys.readouterr().out


def test_merge_works_as_the_first_command_after_a_cut(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    _stops(2, capsys)
    both = _ids(_listing(capsys))
    _cut(fresh_target.workdir / "journal.jsonl")
    assert main(["journal", "--merge"]) == 0  # nothing read since the cut: it syncs first
    out = capsys.readouterr().out
    assert "merged" in out and "nothing to merge" not in out, out
    assert _ids(_listing(capsys)) == both
    assert main(["stop", "--yes"]) == 0


def test_a_divergence_heals_once_the_record_holds_every_record_again(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    _stops(2, capsys)
    both = _ids(_listing(capsys))
    record = fresh_target.workdir / "journal.jsonl"
    full = _cut(record)
    assert main(["stop", "--yes"]) == 1  # refused: the record lacks history
    assert "--merge" in capsys.readouterr().err
    record.write_bytes(full)  # the whole record put back
    assert main(["stop", "--yes"]) == 0  # healed by itself: no merge asked for
    err = capsys.readouterr().err
    assert "the divergence is over" in err, err
    listing = _listing(capsys)
    assert _ids(listing)[:2] == both and "diverged" not in listing["record"]
    assert main(["journal", "--merge"]) == 0
    assert "nothing to merge" in capsys.readouterr().out


def test_a_hostile_user_is_shown_escaped_in_the_merge_line(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge line names who merged (the record's `user`): an ESC or BEL in it was printed
    raw; it is shown as its escape, like the table's cells."""
    monkeypatch.setenv("LOGNAME", EVIL)  # getpass.getuser(): the records' `who`
    _stops(2, capsys)
    _cut(fresh_target.workdir / "journal.jsonl")
    assert main(["journal", "--merge"]) == 0
    printable(capsys)
    assert main(["journal"]) == 0
    both = printable(capsys)
    merged = next(line for line in both.splitlines() if line.startswith("merged "))
    assert " operation(s) from " in merged and f" by {SHOWN}@" in merged, both
