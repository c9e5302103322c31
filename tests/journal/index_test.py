"""journal/index.py, rows.py, view.py: what the store answers through the SQLite index equals what
a full scan of the same bytes gives (testing/journal.py: fold + place_merged + judge), for random
journals, cold, warm and after appends; an index that does not prove itself (truncated, rewritten,
foreign, corrupt, forged, edited out of its window, a symlink) is never trusted and is rebuilt."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops.errors import JournalError
from dsv4ops.journal import recordfile
from dsv4ops.journal.gates import GATES_RECORDED, GateSource, GateVerdict
from dsv4ops.journal.records import RECORD_VERSION, Kind, Status
from dsv4ops.journal.schema import MergeRecord, parse_record, to_json
from dsv4ops.journal.store import UNKNOWN, Journal
from testing.journal import fold, gate_step, judge, known_good, place_merged, records

HASHES = ["h1", "h2", "h3"]


def _begin(
    draw: st.DrawFn, base: dict[str, Any], op: str, kind: str, experiments: list[str]
) -> dict[str, Any]:
    rec = {
        **base,
        "type": "begin",
        "op": op,
        "kind": kind,
        "user": "u",
        "profile": {"name": op, "commands_hash": draw(st.sampled_from(HASHES))},
        "components": draw(st.sampled_from([[], [{"name": "decode"}]])),
    }
    in_experiment: bool = bool(experiments) and draw(st.booleans())
    if in_experiment:
        arm = draw(st.sampled_from(["(A)", "(B)"]))
        rec["reason"] = f"experiment {draw(st.sampled_from(experiments))}: block 1 {arm}"
    if draw(st.integers(0, 5)) == 0:
        rec["scope"] = {"restarted": ["decode"]}
    if draw(st.booleans()):
        rec["gates"] = GATES_RECORDED  # begun by a version that records GateResults
    return rec


def _gate(draw: st.DrawFn, op: str) -> dict[str, Any] | None:
    """A step's GateResult (journal/gates.py), or none (an older version's step, or no gate)."""
    if draw(st.booleans()):
        return None
    return {
        "suite": "smoke",
        "verdict": draw(st.sampled_from([v.value for v in GateVerdict])),
        "source": draw(st.sampled_from([s.value for s in GateSource])),
        "op": op,
        "commands_hash": draw(st.sampled_from([*HASHES, None])),
        "reasons": [],
        "accepted": draw(st.booleans()),
    }


def _status(draw: st.DrawFn, base: dict[str, Any], ops: list[str]) -> dict[str, Any]:
    rec = {
        **base,
        "type": "status",
        "op": draw(st.sampled_from(ops)),
        "status": draw(st.sampled_from([s.value for s in Status])),
    }
    if draw(st.booleans()):
        rec["running"] = draw(st.sampled_from(["", UNKNOWN, *ops]))
    if draw(st.booleans()):
        rec["known_good"] = True
    return rec


def _step(draw: st.DrawFn, base: dict[str, Any], ops: list[str]) -> dict[str, Any]:
    rec = {
        **base,
        "type": "step",
        "op": draw(st.sampled_from(ops)),
        "name": draw(st.sampled_from(["canary", "gate speed", "drain", "start decode"])),
        "phase": draw(st.sampled_from(["start", "done", "failed"])),
        "detail": draw(
            st.sampled_from(["PASS", "verdict FAIL", "INCONCLUSIVE, accepted as asked", None])
        ),
    }
    gate = _gate(draw, draw(st.sampled_from(ops)))
    return rec if gate is None else {**rec, "gate": gate}


@st.composite
def journals(draw: st.DrawFn) -> list[bytes]:
    """Lines of a journal: operations of every kind, gate steps, merges, torn lines."""
    lines: list[bytes] = []
    ops: list[str] = []
    experiments: list[str] = []
    for i in range(draw(st.integers(1, 40))):
        choice = draw(st.integers(0, 9))
        base = {"v": RECORD_VERSION, "ts": f"2026-12-01T00:00:{draw(st.integers(0, 59)):02d}Z"}
        if choice <= 2 or not ops:
            kind = draw(st.sampled_from([k.value for k in Kind]))
            ops.append(f"{kind[0]}-{i}")
            rec = _begin(draw, base, ops[-1], kind, experiments)
            if kind == "experiment":
                experiments.append(ops[-1])
        elif choice <= 5:
            rec = _status(draw, base, ops)
        elif choice <= 7:
            rec = _step(draw, base, ops)
        elif choice == 8:
            rec = {
                **base,
                "type": "merge",
                "op": f"m-{i}",
                "user": "u",
                "ops": draw(st.lists(st.sampled_from(ops), max_size=3)),
            }
        else:
            lines.append(b'{"v":1,"op":"torn\n')  # a crash mid-write
            continue
        lines.append(recordfile.encode(rec))
    return lines


def _full(data: bytes) -> dict[str, Any]:
    """What the store answered before the index: parse, validate, fold, place, judge."""
    parsed, torn = recordfile.parse(data)
    records = [parse_record(r, "x") for _, r in parsed]
    ops = place_merged(fold(records), records)
    return {
        "ops": ops,
        "judged": judge(ops),
        "good": [o.op for o in known_good(ops)],
        "torn": torn,
        "records": records,
        "merges": [to_json(r) for r in records if isinstance(r, MergeRecord)],
    }


def _answers(j: Journal) -> dict[str, Any]:
    ops = j.operations()
    return {
        "ops": list(ops),
        "judged": j.judged(),
        "good": [o.op for o in j.known_good()],
        "torn": j.skipped_lines,
        "records": records(j),
        "merges": j.listing(1)[2],
    }


def _check(j: Journal, data: bytes) -> None:
    full = _full(data)
    assert _answers(j) == full
    ops = full["ops"]
    flying = [o for o in ops if not o.status.terminal and o.kind.changes_target]
    assert j.in_flight() == flying
    assert j.tail_records(3) == full["records"][-3:]
    for o in ops[-3:]:
        assert j.get(o.op) == o
    lkg = next(iter(known_good(ops)), None)
    assert j.last_known_good() == lkg


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=journals(), cut=st.floats(0, 1), partial=st.booleans())
def test_the_index_answers_what_a_full_scan_answers(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    cut: float,
    partial: bool,
) -> None:
    d = tmp_path_factory.mktemp("j")
    path = d / "box.jsonl"
    k = int(len(lines) * cut)
    recordfile.append_bytes(str(path), b"".join(lines[:k]) or b"")
    j = Journal("box", directory=d)
    _check(j, path.read_bytes())  # cold: built by a full scan
    rest = b"".join(lines[k:])
    if partial and rest.endswith(b"\n"):
        rest = rest[:-1]  # a last line whose newline is not written yet
    with open(path, "ab") as f:
        f.write(rest)
    data = path.read_bytes()
    _check(j, data)  # warm: the appended bytes folded in
    _check(Journal("box", directory=d), data)  # a fresh process: the index file + its tail


def _meta(path: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(f"{path}.sqlite")) as db:
        return dict(db.execute("SELECT k, v FROM meta"))


def _forge(path: Path, sql: str, *args: object) -> None:
    """Edit the index with a SQL client."""
    with contextlib.closing(sqlite3.connect(f"{path}.sqlite")) as db:
        db.execute(sql, args)
        db.commit()


def test_a_forged_row_is_caught_when_its_operation_is_read(tmp_path: Path) -> None:
    """A row edited with a SQL client (a deploy that ran no gate made known-good): its
    operation, read back for rollback's list, does not have those facts: rebuilt, said, and
    the list is the rule's."""
    said: list[str] = []
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 2)
    lone = j.begin(Kind.DEPLOY, profile={"name": "x", "commands_hash": "hx"}, components=[{}])
    j.transition(lone, Status.SUCCEEDED, running=lone, known_good=True)  # no gate: not good
    assert [o.op for o in j.known_good()] == ops[::-1]
    _forge(j.path, "UPDATE ops SET own = 2, why = 'known-good: forged' WHERE op = ?", lone)
    fresh = Journal("box", directory=tmp_path, notify=said.append)
    assert [o.op for o in fresh.known_good()] == ops[::-1]
    assert any(f"its row of {lone} does not match" in w for w in said), said
    _check(fresh, j.path.read_bytes())


def _deploys(j: Journal, n: int) -> list[str]:
    ops = []
    for i in range(n):
        op = j.begin(
            Kind.DEPLOY,
            profile={"name": f"p{i}", "commands_hash": f"h{i}"},
            components=[{"name": "decode"}],
        )
        j.transition(op, Status.RUNNING)
        gate_step(j, op)
        j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
        ops.append(op)
    return ops


def test_appends_keep_the_cache_current(tmp_path: Path) -> None:
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 3)
    lkg = j.last_known_good()
    assert lkg is not None and lkg.op == ops[-1]
    state = json.loads(_meta(j.path)["state"])
    assert state["size"] == j.path.stat().st_size and state["ops"] == 3
    with contextlib.closing(sqlite3.connect(f"{j.path}.sqlite")) as db:
        assert [op for (op,) in db.execute("SELECT op FROM ops ORDER BY place")] == ops
        assert db.execute("SELECT count(*) FROM ops WHERE own = 2").fetchone()[0] == 3
    assert (Path(f"{j.path}.sqlite").stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "rewritten", "foreign", "version", "forged", "places", "rows"],
)
def test_a_cache_that_does_not_prove_itself_is_rebuilt(tmp_path: Path, damage: str) -> None:
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 4)
    db = Path(f"{j.path}.sqlite")
    if damage == "garbage":
        db.write_bytes(b"\x00not an index\n" * 100)
    elif damage == "truncated":  # the journal cut back to two deploys (a restored backup)
        lines = j.path.read_bytes().splitlines(keepends=True)
        j.path.write_bytes(b"".join(lines[:8]))
    elif damage == "rewritten":  # same size, other bytes: the window proof fails
        j.path.write_bytes(
            j.path.read_bytes().replace(ops[1].encode(), ops[1][:-1].encode() + b"z")
        )
    elif damage == "foreign":  # another journal's cache copied next to this one
        other = Journal("other", directory=tmp_path)
        _deploys(other, 1)
        os.replace(f"{other.path}.sqlite", db)
    elif damage == "version":
        _forge(j.path, "PRAGMA user_version = 99")
    elif damage == "forged":  # a state field outside what its sha256 was made of
        _forge(j.path, "UPDATE meta SET v = replace(v, '\"merges\":[]', '\"merges\":[5]')")
    elif damage == "places":  # a row moved in the journal's order: places are 0 .. n-1
        _forge(j.path, "UPDATE ops SET place = 7 WHERE row = 1")
    else:  # a row deleted: the state says more operations than the table holds
        _forge(j.path, "DELETE FROM ops WHERE row = 1")
    data = j.path.read_bytes()
    _check(Journal("box", directory=tmp_path), data)
    state = json.loads(_meta(j.path)["state"])
    assert state["size"] == len(data) and "merges" in state  # written again


def test_an_old_index_file_is_deleted_on_first_read(tmp_path: Path) -> None:
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 2)
    old = Path(f"{j.path}.idx")  # what versions before the SQLite cache wrote
    old.write_bytes(b'{"format":"dsv4ops-journal-index","version":4}\n')
    fresh = Journal("box", directory=tmp_path)
    assert [o.op for o in fresh.operations()] == ops
    assert not old.exists() and Path(f"{j.path}.sqlite").exists()


def test_a_cache_longer_than_the_record_is_rebuilt_with_a_warning(tmp_path: Path) -> None:
    said: list[str] = []
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 3)
    assert len(j.operations()) == 3
    lines = j.path.read_bytes().splitlines(keepends=True)
    j.path.write_bytes(b"".join(lines[:4]))  # the record cut: the cache indexes more of it
    fresh = Journal("box", directory=tmp_path, notify=said.append)
    assert [o.op for o in fresh.operations()] == ops[:1]
    assert any("the journal was cut or replaced" in w and ".sqlite" in w for w in said), said
    _check(fresh, j.path.read_bytes())


def test_an_edit_outside_the_window_is_caught_when_its_operation_is_read(tmp_path: Path) -> None:
    j = Journal("box", directory=tmp_path)
    ops = [f"d-{i}" for i in range(400)]  # > 64 KiB: the first lie outside the size+window proof
    base = {"v": RECORD_VERSION, "ts": "2026-12-01T00:00:00Z"}
    recordfile.append_bytes(
        str(j.path),
        b"".join(
            recordfile.encode({**base, "op": op, **r})
            for op in ops
            for r in (
                {
                    "type": "begin",
                    "kind": "deploy",
                    "user": "u",
                    "components": [{"name": "decode"}],
                },
                {"type": "status", "status": "RUNNING"},
                {"type": "status", "status": "SUCCEEDED", "running": op, "known_good": True},
            )
        ),
    )
    assert j.path.stat().st_size > recordfile.WINDOW
    assert len(j.operations()) == 400  # the index is built and written
    data = j.path.read_bytes()
    at = data.index(b'"status":"RUNNING"')  # ops[0]'s, far from the end; the same length
    j.path.write_bytes(data[:at] + b'"status":"FAILED" ' + data[at + 18 :])
    fresh = Journal("box", directory=tmp_path)
    assert fresh.get(ops[0]).status is Status.SUCCEEDED  # its last status is unchanged
    bad = data[:at] + b'"op":"x"' + b" " * 10 + data[at + 18 :]  # not ops[0]'s record any more
    j.path.write_bytes(bad)
    again = Journal("box", directory=tmp_path)  # rebuilt by a full scan: it names the line
    assert again.get(ops[0]).status is Status.SUCCEEDED
    assert any("box.jsonl:2: journal status record lacks" in w for w in again.warnings())


def test_a_cache_path_that_is_a_symlink_is_never_followed(tmp_path: Path) -> None:
    j = Journal("box", directory=tmp_path)
    _deploys(j, 2)
    db = Path(f"{j.path}.sqlite")
    victim = tmp_path / "victim"
    victim.write_bytes(db.read_bytes())
    db.unlink()
    db.symlink_to(victim)
    before = victim.read_bytes()
    fresh = Journal("box", directory=tmp_path)
    _deploys(fresh, 1)
    _check(fresh, j.path.read_bytes())
    assert victim.read_bytes() == before  # neither read as the index nor written through
    assert not db.is_symlink()  # replaced by the rebuilt cache


def test_an_index_damaged_while_it_is_read_is_a_clear_error_and_the_next_read_rebuilds(
    tmp_path: Path,
) -> None:
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 3)
    fresh = Journal("box", directory=tmp_path)
    listed = fresh.operations()
    assert len(listed) == 3  # the rows counted; no operation read yet
    _forge(j.path, "DROP TABLE ops")  # what SQLite would call malformed
    with pytest.raises(JournalError, match=r"box.jsonl.sqlite was damaged while it was read"):
        listed[0]
    assert not Path(f"{j.path}.sqlite").exists()  # removed: nothing reads it again
    assert Journal("box", directory=tmp_path).get(ops[0]).op == ops[0]  # rebuilt


def _gated(op: str, verdict: str, h: str | None, source: str = "deploy") -> dict[str, Any]:
    gate = {"suite": "smoke", "verdict": verdict, "source": source, "op": op, "commands_hash": h}
    return {"type": "step", "name": "gate", "phase": "done", "gate": {**gate, "reasons": []}}


def _run(tmp_path: Path, ops: list[tuple[str, list[dict[str, Any]]]]) -> Journal:
    """A journal of these operations' records (each op's own, in order), read cold."""
    base = {"v": RECORD_VERSION, "ts": "2026-12-01T00:00:00Z"}
    path = tmp_path / "box.jsonl"
    for op, recs in ops:
        recordfile.append_bytes(
            str(path), b"".join(recordfile.encode({**base, "op": op, **r}) for r in recs)
        )
    return Journal("box", directory=tmp_path)


def _unit(kind: str, h: str, reason: str | None = None) -> list[dict[str, Any]]:
    begin = {"type": "begin", "kind": kind, "user": "u", "components": [{"name": "decode"}],
             "profile": {"name": kind, "commands_hash": h}, "gates": GATES_RECORDED}  # fmt: skip
    return [begin] if reason is None else [{**begin, "reason": reason}]


_SERVED = {"type": "status", "status": "SUCCEEDED", "known_good": True}


def test_a_rollback_s_inherited_rank_follows_its_source_and_a_later_failure(tmp_path: Path) -> None:
    """A rollback that ran no gate is as good as the best known-good of its commands before it:
    judged when read, so a gate its commands fail later takes it back (no row is re-judged)."""
    ops = [("d-1", [*_unit("deploy", "h1"), _gated("d-1", "PASS", "h1"), _SERVED])]
    ops += [("r-2", [*_unit("rollback", "h1"), _SERVED])]
    j = _run(tmp_path, ops)
    assert (
        j.judged()["r-2"].why
        == "known-good: restored the commands of d-1 (whole unit, served through the router, canary gate PASS)"
    )
    _check(j, (tmp_path / "box.jsonl").read_bytes())
    later = [("d-3", [*_unit("deploy", "h1"), {**_gated("d-3", "FAIL", "h1"), "phase": "failed"}])]
    j = _run(tmp_path, later)
    assert not j.judged()["r-2"].known_good and [o.op for o in j.known_good()] == []
    _check(j, (tmp_path / "box.jsonl").read_bytes())


def test_the_first_failed_gate_of_an_experiment_is_the_one_named(tmp_path: Path) -> None:
    """An experiment's gates in their order: one that names no commands (an older A/B gate: its
    B block's), then one that names them; the first is what a later deploy of them is told."""
    exp = [{"type": "begin", "kind": "experiment", "user": "u", "gates": GATES_RECORDED}]
    exp += [_gated("d-2", "FAIL", None, "ab-gate"), _gated("d-2", "FAIL", "h1", "ab-gate")]
    ops = [("e-1", exp[:1]), ("d-2", [*_unit("deploy", "h1", "experiment e-1: block 1 (B)")])]
    ops += [
        ("e-1", exp[1:]),
        ("d-3", [*_unit("deploy", "h1"), _gated("d-3", "PASS", "h1"), _SERVED]),
    ]
    j = _run(tmp_path, ops)
    assert "of experiment e-1 (deploy)" in j.judged()["d-3"].why
    _check(j, (tmp_path / "box.jsonl").read_bytes())


def test_an_experiment_begun_after_its_block_makes_it_an_arm(tmp_path: Path) -> None:
    """The arm check is a lookup when read: an experiment begun later (a merge, a clock) that
    names an earlier deploy as its block takes its known-good away without re-judging its row."""
    block = [*_unit("deploy", "h9", "experiment e-9: block 1 (B)"), _gated("d-0", "PASS", "h9")]
    j = _run(tmp_path, [("d-0", [*block, _SERVED])])
    assert [o.op for o in j.known_good()] == ["d-0"]
    j = _run(tmp_path, [("e-9", [{"type": "begin", "kind": "experiment", "user": "u"}])])
    assert [o.op for o in j.known_good()] == [] and "A/B experiment e-9" in j.judged()["d-0"].why
    _check(j, (tmp_path / "box.jsonl").read_bytes())


def test_a_read_stays_what_it_read_while_the_journal_grows(tmp_path: Path) -> None:
    """A lazy Sequence handed out by one read answers as that read found the journal: records
    appended since (rows the next fold rewrote, operations begun since) are not in it."""
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 2)
    op = j.begin(Kind.DEPLOY, profile={"name": "p", "commands_hash": "h"}, components=[{}])
    listed = j.operations()
    j.transition(op, Status.RUNNING)  # its row now holds three records
    later = j.begin(Kind.STOP)
    assert len(listed) == 3 and [o.op for o in listed] == [*ops, op]
    assert listed[-1].status is Status.PENDING and listed.find(later) is None
    assert j.get(op).status is Status.RUNNING and len(j.operations()) == 4
