"""The SQLite index's tables (journal/rows.py, index.py): folded on over any mix of reads and
appends (merges that re-place the rows included), they hold what one full build of the same
record holds; the walks (kinds, statuses, profiles, known-good) answer what a walk over the fully
folded operations answers; a cold read reads only what it returns."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops.journal import recordfile, rows
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.schema import parse_record
from dsv4ops.journal.store import Journal
from testing.journal import fold, known_good, place_merged
from tests.journal.index_test import HASHES, _deploys, journals

_JUDGED = (Kind.DEPLOY, Kind.ROLLBACK, Kind.EXPERIMENT)


def _tables(db: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
    ops = db.execute("SELECT * FROM ops ORDER BY row").fetchall()
    return ops, sorted(db.execute("SELECT * FROM fails").fetchall(), key=repr)


def _built_whole(path: Path) -> tuple[list[Any], list[Any]]:
    """The tables one full scan of the record's whole lines builds (in memory)."""
    data = path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    try:
        db, _ = rows.scan(fd, data, data.rfind(b"\n") + 1, str(path))
    finally:
        os.close(fd)
    return _tables(db)


def _ops(data: bytes) -> list[Operation]:
    parsed, _ = recordfile.parse(data)
    records = [parse_record(r, "x") for _, r in parsed]
    return place_merged(fold(records), records)


def _newest_first(
    ops: list[Operation], kinds: set[Kind] | None, status: Status | None, profile: dict[str, Any]
) -> list[str]:
    """Operations.newest_first's rule over whole operations: kind, status, and the profile's
    name and commands hash of the kinds whose rows keep them (deploys, rollbacks, experiments)."""
    out = []
    for o in reversed(ops):
        p = o.profile or {}
        kept = {k: p[k] for k in ("name", "commands_hash") if k in p}
        indexed = kept if o.kind in _JUDGED else None
        if (kinds is not None and o.kind not in kinds) or (
            status is not None and o.status != status
        ):
            continue
        if profile and indexed is not None and any(indexed.get(k) != v for k, v in profile.items()):
            continue
        out.append(o.op)
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=journals(),
    cuts=st.lists(st.integers(0, 40), max_size=3),
    kinds=st.none() | st.sets(st.sampled_from(list(Kind)), min_size=1),
    status=st.none() | st.sampled_from(list(Status)),
    profile=st.sampled_from([{}, {"commands_hash": HASHES[0]}, {"name": "d-0", "x": None}]),
)
def test_columns_read_back_hold_every_entry_and_walks_match_the_full_scan(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    cuts: list[int],
    kinds: set[Kind] | None,
    status: Status | None,
    profile: dict[str, Any],
) -> None:
    d = tmp_path_factory.mktemp("j")
    path = d / "box.jsonl"
    at = 0
    for k in sorted({c % (len(lines) + 1) for c in cuts} | {len(lines)}):
        recordfile.append_bytes(str(path), b"".join(lines[at:k]))
        at = k
        j = Journal("box", directory=d)  # a fresh process: the index + the lines since
        ops = j.operations()
        if path.stat().st_size:  # folded on, its rows and places are what a full build makes
            with contextlib.closing(sqlite3.connect(f"{path}.sqlite")) as db:
                assert _tables(db) == _built_whole(path)
        whole = _ops(path.read_bytes())
        assert list(ops) == whole
        got = [o.op for o in ops.newest_first(kinds=kinds, status=status, profile=profile)]
        assert got == _newest_first(whole, kinds, status, profile)
        assert [ops[p].op for p in ops.positions(terminal=False)] == [
            o.op for o in whole if not o.status.terminal
        ]
        good = j.known_good()
        assert [o.op for o in good] == [o.op for o in known_good(whole)]
        assert len(good) == len(known_good(whole))


def test_a_cold_read_reads_only_the_operations_it_returns(tmp_path: Path) -> None:
    """rollback's known-good list, deploy's walk back and in-flight read no operation they do
    not return (each one read is folded once and cached by the Journal: counted here)."""
    ops = _deploys(Journal("box", directory=tmp_path), 30)
    fresh = Journal("box", directory=tmp_path)
    good = fresh.known_good()
    assert good[0].op == ops[-1] and len(fresh._loaded) == 1  # the newest pass, read alone
    assert [o.op for o in good[:3]] == ops[:-4:-1] and len(fresh._loaded) == 3
    assert len(good) == 30 and len(fresh._loaded) == 3  # counted from the ranks, none read
    miss = fresh.operations().newest_first(kinds=(Kind.DEPLOY,), profile={"name": "nope"})
    assert list(miss) == [] and fresh.in_flight() == [] and len(fresh._loaded) == 3
    hit = fresh.operations().newest_first(profile={"commands_hash": "h7"})
    assert [o.op for o in hit] == [ops[7]] and len(fresh._loaded) == 4


def test_two_writers_folding_one_index_leave_it_whole(tmp_path: Path) -> None:
    """Two processes' worth of Journals (each its own connection) appending and reading one
    record at once: each fold waits for the other's (SQLite's write lock) or finds the index
    already past what it mapped (mapped again); the index is then what one full build makes."""
    errors: list[BaseException] = []

    def write(name: str) -> None:
        try:
            j = Journal("box", directory=tmp_path)
            for _ in range(40):
                op = j.begin(Kind.DEPLOY, profile={"name": name}, components=[{"name": "d"}])
                j.transition(op, Status.RUNNING)
                j.transition(op, Status.SUCCEEDED, running=op)
                assert j.get(op).status is Status.SUCCEEDED
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    path = tmp_path / "box.jsonl"
    assert [o.op for o in Journal("box", directory=tmp_path).operations()] == [
        o.op for o in _ops(path.read_bytes())
    ]
    with contextlib.closing(sqlite3.connect(f"{path}.sqlite")) as db:
        assert _tables(db) == _built_whole(path)
