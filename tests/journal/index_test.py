"""journal/index.py + journal/view.py: what the store answers through the index equals what a full
scan of the same bytes gives (records.fold + place_merged + knowngood.judge), for random
journals, cold, warm and after appends; an index that does not prove itself (truncated, rewritten,
foreign, corrupt, edited out of its window, a symlink) is never trusted and is rebuilt."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops.errors import JournalError
from dsv4ops.journal import cache, checkpoint, knowngood, recordfile
from dsv4ops.journal.entries import KINDS, STATUSES
from dsv4ops.journal.gates import GATES_RECORDED, GateSource, GateVerdict
from dsv4ops.journal.records import (
    RECORD_VERSION,
    Kind,
    Operation,
    Status,
    fold,
    place_merged,
)
from dsv4ops.journal.schema import MergeRecord, parse_record, to_json
from dsv4ops.journal.store import UNKNOWN, Journal
from testing.journal import gate_step

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
        "judged": knowngood.judge(ops),
        "good": [o.op for o in knowngood.known_good(ops)],
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
        "records": list(j.records()),
        "merges": j.merges(),
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
    lkg = next(iter(knowngood.known_good(ops)), None)
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


class _Judged:
    """An index entry as journal/checkpoint.py reads it, from a fully folded Operation."""

    def __init__(self, o: Operation, count: int) -> None:
        self.op, self.count, self._o = o.op, count, o

    @property
    def terminal(self) -> bool:
        return self._o.status.terminal

    def essentials(self) -> Operation:
        return knowngood.essentials(self._o)


def _order(raw: list[dict[str, Any]]) -> list[_Judged]:
    records = [parse_record(r, "x") for r in raw]
    counts = Counter(r.op for r in records if not isinstance(r, MergeRecord))
    return [_Judged(o, counts[o.op]) for o in place_merged(fold(records), records)]


_GATES = [
    ("canary", "done", "PASS"),
    ("canary", "failed", "verdict FAIL"),
    ("canary", "done", "INCONCLUSIVE, accepted as asked"),
    ("gate speed", "failed", None),
    ("gate speed", "done", None),
    ("drain", "done", None),
]


@st.composite
def whole_ops(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """(records of operations written whole, where each one ends): begin, gate steps, a terminal
    status (what a checkpoint is taken over), with strays: a record of an earlier operation, a
    merge. The checkpoints are taken where operations end: what the index keeps."""
    records: list[dict[str, Any]] = []
    ends: list[int] = []
    ops: list[str] = []
    experiments: list[str] = []
    for i in range(draw(st.integers(2, 14))):
        base = {"v": RECORD_VERSION, "ts": f"2026-12-01T00:00:{draw(st.integers(0, 59)):02d}Z"}
        stray = draw(st.integers(0, 9)) if ops else 9
        if stray == 0:
            records.append(draw(st.sampled_from([_status, _step]))(draw, base, ops))
        elif stray == 1:
            records.append(
                {
                    **base,
                    "type": "merge",
                    "op": f"m-{i}",
                    "user": "u",
                    "ops": draw(st.lists(st.sampled_from(ops), max_size=2)),
                }
            )
        else:
            kind = draw(st.sampled_from(["deploy", "deploy", "rollback", "experiment"]))
            ops.append(f"{kind[0]}-{i}")
            later = [f"e-{n}" for n in range(i + 1, i + 3)]  # a reason naming one not begun yet
            records.append(_begin(draw, base, ops[-1], kind, experiments + later))
            if kind == "experiment":
                experiments.append(ops[-1])
            for name, phase, detail in draw(st.lists(st.sampled_from(_GATES), max_size=2)):
                step = {
                    **base,
                    "type": "step",
                    "op": ops[-1],
                    "name": name,
                    "phase": phase,
                    "detail": detail,
                }
                gate = _gate(draw, ops[-1])
                records.append(step if gate is None else {**step, "gate": gate})
            records.append(
                {
                    **base,
                    "type": "status",
                    "op": ops[-1],
                    "known_good": True,
                    "status": draw(st.sampled_from(["SUCCEEDED", "SUCCEEDED", "FAILED"])),
                }
            )
        ends.append(len(records))
    return records, ends


def _whole(lines: list[bytes]) -> tuple[list[dict[str, Any]], list[int]]:
    parsed, _ = recordfile.parse(b"".join(lines))
    records = [r for _, r in parsed]
    return records, list(range(len(records) + 1))


@settings(max_examples=300, deadline=None)
@given(
    journal=st.one_of(whole_ops(), journals().map(_whole)),
    cuts=st.lists(st.integers(0, 40), max_size=4),
    advance=st.sampled_from([1, 2, 10**9]),
)
def test_a_checkpoint_judges_what_a_full_judge_judges(
    journal: tuple[list[dict[str, Any]], list[int]], cuts: list[int], advance: int
) -> None:
    """Checkpoints taken after any prefixes, resumed over whatever was appended (records of the
    operations it judged, merges, experiments, failed gates), and moved on over the operations
    ended since (`advance` of them): always knowngood.judge's answer, and each checkpoint is
    the one a fresh take() of its operations gives."""
    records, ends = journal
    ck = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(checkpoint, "ADVANCE", advance)
        for k in sorted(ends[c % len(ends)] for c in cuts) + [len(records)]:
            order = _order(records[:k])
            judged, ck = checkpoint.judged(order, ck)
            assert judged == knowngood.judge([o._o for o in order])
            assert ck.upto <= len(order)
            assert ck == checkpoint.take([o.essentials() for o in order[: ck.upto]], ck.proof)
            again = checkpoint.decode(checkpoint.encode(ck))
            assert again == ck  # what the index file keeps is the checkpoint itself
            judged, _ = checkpoint.judged(order, again)  # read back: resumed from it
            assert judged == knowngood.judge([o._o for o in order])


def test_a_checkpoint_is_resumed_over_appends_and_refused_when_they_change_its_past() -> None:
    base = {"v": RECORD_VERSION, "ts": "2026-12-01T00:00:00Z", "user": "u"}

    def deploy(op: str, h: str, detail: str = "PASS", phase: str = "done") -> list[dict[str, Any]]:
        return [
            {
                **base,
                "op": op,
                "type": "begin",
                "kind": "deploy",
                "components": [{}],
                "profile": {"name": op, "commands_hash": h},
            },
            {**base, "op": op, "type": "step", "name": "canary", "phase": phase, "detail": detail},
            {**base, "op": op, "type": "status", "status": "SUCCEEDED", "known_good": True},
        ]

    records = deploy("d-1", "h1") + deploy("d-2", "h2")
    judged, ck = checkpoint.judged(_order(records), None)
    assert ck.upto == 2 and judged["d-2"].known_good
    records += deploy("d-3", "h3")  # new commands, a pass: resumed (the same checkpoint)
    judged, again = checkpoint.judged(_order(records), ck)
    assert again is ck and judged["d-3"].known_good
    failing = records + deploy("d-4", "h1", "verdict FAIL", "failed")  # d-1's commands fail
    judged, fresh = checkpoint.judged(_order(failing), ck)
    assert fresh is not ck and not judged["d-1"].known_good
    assert judged == knowngood.judge([o._o for o in _order(failing)])
    named = records + [{**base, "op": "e-9", "type": "begin", "kind": "experiment"}]
    armed = deploy("d-0", "h9")
    armed[0]["reason"] = "experiment e-9: block 1 (B)"  # begun before its experiment was
    judged, ck0 = checkpoint.judged(_order(armed + records), None)
    assert judged["d-0"].known_good
    judged, fresh = checkpoint.judged(_order(armed + named), ck0)
    assert fresh is not ck0 and "A/B experiment e-9" in judged["d-0"].why
    touched = records + [{**base, "op": "d-1", "type": "status", "status": "FAILED"}]
    judged, fresh = checkpoint.judged(_order(touched), ck)  # a record of d-1: the proof fails
    assert fresh is not ck and not judged["d-1"].known_good


def _meta(path: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(f"{path}.sqlite")) as db:
        return dict(db.execute("SELECT k, v FROM meta"))


def _forge(path: Path, sql: str, *args: object, rehash: bool = False) -> None:
    """Edit the cache with a SQL client (`rehash`: its sha256 made to match: it is no MAC)."""
    with contextlib.closing(sqlite3.connect(f"{path}.sqlite")) as db:
        db.execute(sql, args)
        if rehash:
            m = dict(db.execute("SELECT k, v FROM meta"))
            ck_sha = cache.sha256(m["checkpoint"])
            db.execute("UPDATE meta SET v = ? WHERE k = 'ck_sha'", (ck_sha,))
            db.execute(
                "UPDATE meta SET v = ? WHERE k = 'digest'", (cache.digest(m["state"], ck_sha),)
            )
        db.commit()


@pytest.mark.parametrize("rehash", [False, True])
def test_a_checkpoint_that_does_not_prove_itself_is_never_used(
    tmp_path: Path, rehash: bool
) -> None:
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 3)
    assert j.judged()[ops[0]].known_good  # judged: the checkpoint is written to the cache
    ck = _meta(j.path)["checkpoint"]
    assert checkpoint.decode(ck.encode()) is not None
    lie = ck.replace('"ranks":"222"', '"ranks":"000"')
    assert lie != ck
    if rehash:  # the proof garbled too: the checkpoint does not prove itself
        lie = lie.replace('"proof":"', '"proof":"0')
    _forge(j.path, "UPDATE meta SET v = ? WHERE k = 'checkpoint'", lie, rehash=rehash)
    fresh = Journal("box", directory=tmp_path)
    _check(fresh, j.path.read_bytes())
    assert fresh.judged()[ops[0]].known_good


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
    assert len(KINDS) <= 10 and len(STATUSES) <= 10  # the cache's load reads one digit each
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 3)
    lkg = j.last_known_good()
    assert lkg is not None and lkg.op == ops[-1]
    state = json.loads(_meta(j.path)["state"])
    assert state["size"] == j.path.stat().st_size and state["ops"] == 3
    with contextlib.closing(sqlite3.connect(f"{j.path}.sqlite")) as db:
        assert [op for (op,) in db.execute("SELECT op FROM ops ORDER BY row")] == ops
    assert (Path(f"{j.path}.sqlite").stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    "damage", ["garbage", "truncated", "rewritten", "foreign", "version", "forged", "rows"]
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


def test_a_row_gone_while_it_is_read_is_a_clear_error_and_the_next_read_rebuilds(
    tmp_path: Path,
) -> None:
    j = Journal("box", directory=tmp_path)
    ops = _deploys(j, 3)
    fresh = Journal("box", directory=tmp_path)
    assert len(fresh.operations()) == 3  # the rows' codes read; no row read whole yet
    _forge(j.path, "DELETE FROM ops WHERE row = 0")  # what SQLite would call malformed
    with pytest.raises(JournalError, match=r"box.jsonl.sqlite was damaged while it was read"):
        fresh.get(ops[0])
    assert not Path(f"{j.path}.sqlite").exists()  # removed: nothing reads it again
    assert Journal("box", directory=tmp_path).get(ops[0]).op == ops[0]  # rebuilt
