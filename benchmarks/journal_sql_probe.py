# ruff: noqa: T201
"""The design probe for issue 39 item 4 that journal/index.py, rows.py and view.py were built on
(kept for its numbers): a SQL-first journal index, one summary row per operation kept current on
append, the known-good candidates found through a partial index and the commands that failed a
gate as a table, timed at 10^6 records.

What it measured is whether the hot queries can be index lookups instead of the index before it
(in-memory columns, an order and a judgement checkpoint):

  * cold `status`: in-flight operations (a partial index on the live ones), the newest ended
    operation that names what runs (the rowid backwards), the newest operation;
  * cold `journal`: the last 20 rows with their judgement and failed-gate lookups;
  * cold known-good: the best known-good (a partial index on rank > 0, minus failed commands) and a
    walk for a profile no deploy has (an index on the profile);
  * one append: a deploy's 12 records, each appended and fsynced to the JSONL and folded into the
    cache (the touched operation's earlier records re-read by their offsets), one transaction each.

The rank here is a stand-in (SUCCEEDED with the known_good mark); the real rule (knowngood.py)
would be kept per row on append, with the failed-gate table applied when read, a rollback's
inherited rank re-judged when its source's changes, a merge re-placing and re-judging all rows.

Usage: python benchmarks/journal_sql_probe.py [--records N]; numbers: docs/development-notes.md.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sqlite3
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from journal_scale import build  # noqa: E402 (this script's own directory)

from dsv4ops.jsontypes import JSONObject  # noqa: E402

DDL = """
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE ops(
  pos INTEGER PRIMARY KEY, op TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, status TEXT NOT NULL,
  live INTEGER NOT NULL, ts TEXT NOT NULL, running TEXT, count INTEGER NOT NULL,
  offsets BLOB NOT NULL, profile TEXT, hash TEXT, reason TEXT, rank INTEGER NOT NULL, why TEXT);
CREATE INDEX ops_live ON ops(live) WHERE live = 1;
CREATE INDEX ops_rank ON ops(rank, pos) WHERE rank > 0;
CREATE INDEX ops_hash ON ops(hash, rank);
CREATE INDEX ops_profile ON ops(profile, kind, status, pos);
CREATE TABLE failed(hash TEXT PRIMARY KEY, what TEXT NOT NULL, pos INTEGER NOT NULL);
"""
TERMINAL = {"SUCCEEDED", "FAILED", "ROLLED_BACK", "ABANDONED"}
Row = tuple[str, str, str, int, str, str | None, int, bytes, str | None, str | None, str | None]


def summarize(op: str, recs: list[tuple[int, JSONObject]]) -> tuple[object, ...]:
    """One operation's row from its records (offset, record), begin first."""
    begin = recs[0][1]
    status, running, marked = "PENDING", None, False
    for _, r in recs[1:]:
        if r["type"] == "status":
            status = str(r["status"])
            running = r.get("running", running)
            marked = marked or bool(r.get("known_good"))
    profile = begin.get("profile")
    p = profile if isinstance(profile, dict) else {}
    rank = 2 if status == "SUCCEEDED" and marked else 0
    return (
        op,
        begin["kind"],
        status,
        int(status not in TERMINAL),
        begin["ts"],
        running,
        len(recs),
        array("q", [o for o, _ in recs]).tobytes(),
        p.get("name"),
        p.get("commands_hash"),
        begin.get("reason"),
        rank,
        "known-good" if rank else "not known-good",
    )


def fold(db: sqlite3.Connection, path: Path, start: int) -> None:
    """Fold the records after byte `start` into the cache: one transaction."""
    with path.open("rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        touched: dict[str, list[tuple[int, JSONObject]]] = {}
        offset = start
        for raw in data[start:].split(b"\n"):
            at, offset = offset, offset + len(raw) + 1
            if raw:
                rec = json.loads(raw)
                touched.setdefault(str(rec["op"]), []).append((at, rec))
        db.execute("BEGIN IMMEDIATE")
        rows = []
        for op, new in touched.items():
            old = db.execute("SELECT offsets FROM ops WHERE op = ?", (op,)).fetchone()
            prior = []
            for o in array("q", old[0] if old else b""):
                prior.append((o, json.loads(data[o : data.find(b"\n", o)])))
            rows.append(summarize(op, prior + new))
        db.executemany(
            "INSERT INTO ops(op, kind, status, live, ts, running, count, offsets, profile, hash,"
            " reason, rank, why) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(op) DO UPDATE SET status = excluded.status, live = excluded.live,"
            " running = excluded.running, count = excluded.count, offsets = excluded.offsets,"
            " rank = excluded.rank, why = excluded.why",
            rows,
        )
        db.execute("INSERT OR REPLACE INTO meta VALUES ('size', ?)", (str(len(data)),))
        db.execute("COMMIT")
        data.close()


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def cold_status(path: Path) -> object:
    db = connect(path)
    live = db.execute("SELECT pos, op FROM ops WHERE live = 1 AND kind != 'runbook'").fetchall()
    running = db.execute(
        "SELECT running FROM ops WHERE live = 0 AND running IS NOT NULL ORDER BY pos DESC LIMIT 1"
    ).fetchone()
    deployed = db.execute("SELECT * FROM ops WHERE op = ?", running).fetchone()
    newest = db.execute("SELECT * FROM ops ORDER BY pos DESC LIMIT 1").fetchone()
    db.close()
    return live, deployed, newest


def cold_journal(path: Path) -> object:
    db = connect(path)
    last = db.execute(
        "SELECT op, rank, why, (SELECT what FROM failed f WHERE f.hash = ops.hash) FROM ops"
        " ORDER BY pos DESC LIMIT 20"
    ).fetchall()
    db.close()
    return last


def cold_known_good(path: Path) -> object:
    db = connect(path)
    head = db.execute(
        "SELECT op FROM ops WHERE rank > 0 AND (hash IS NULL OR hash NOT IN"
        " (SELECT hash FROM failed)) ORDER BY rank DESC, pos DESC LIMIT 3"
    ).fetchall()
    miss = db.execute(
        "SELECT op FROM ops WHERE profile = 'nope' AND kind IN ('deploy', 'rollback')"
        " AND status = 'SUCCEEDED' ORDER BY pos DESC LIMIT 1"
    ).fetchone()
    db.close()
    return head, miss


def best(fn: Callable[[], object], n: int = 3) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return min(times)


def append_deploy(db: sqlite3.Connection, path: Path) -> float:
    """A deploy's 12 records, each appended, fsynced and folded: ms per record."""
    base: JSONObject = {"v": 1, "ts": "2099-12-31T00:00:00.000Z", "op": "d-20991231T000000-0001"}
    recs: list[JSONObject] = [{**base, "type": "begin", "kind": "deploy", "user": "u"}]
    recs.append({**base, "type": "status", "status": "RUNNING"})
    recs += [{**base, "type": "step", "name": f"s{i}", "phase": "done"} for i in range(9)]
    recs.append({**base, "type": "status", "status": "SUCCEEDED", "known_good": True})
    t0 = time.perf_counter()
    for r in recs:
        size = path.stat().st_size
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, (json.dumps(r) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        fold(db, path, size)
    return (time.perf_counter() - t0) * 1000 / len(recs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal" / "box.jsonl"
        build(path, args.records)
        cache = Path(f"{path}.probe.sqlite")
        db = connect(cache)
        db.executescript(DDL)
        t0 = time.perf_counter()
        fold(db, path, 0)
        print(f"{'cache build (once)':<40} {time.perf_counter() - t0:10.1f} s")
        db.close()
        print(f"{'cold status':<40} {best(lambda: cold_status(cache)):10.1f} ms")
        print(f"{'cold journal (last 20)':<40} {best(lambda: cold_journal(cache)):10.1f} ms")
        print(
            f"{'cold known-good (+ a profile miss)':<40} {best(lambda: cold_known_good(cache)):10.1f} ms"
        )
        db = connect(cache)
        print(f"{'one append (fsynced, folded)':<40} {append_deploy(db, path):10.1f} ms")
        db.close()
        sizes = [Path(f"{cache}{s}") for s in ("", "-wal")]  # (the WAL is gone once closed)
        mb = sum(p.stat().st_size for p in sizes if p.exists()) / 1e6
        print(f"{'cache file (+ its WAL)':<40} {mb:10.1f} MB")


if __name__ == "__main__":
    main()
