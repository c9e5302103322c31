"""The journal index's tables (`ops`, `fails`, `meta`) and `fold`, which keeps them current
(index.py holds them). docs/deploy.md, "The journal: record, index, judge"."""

from __future__ import annotations

import copy
import json
import mmap
import sqlite3
from array import array
from dataclasses import dataclass, field

from dsv4ops.journal import damage, knowngood, recordfile
from dsv4ops.journal.records import Kind, Operation, fold_into
from dsv4ops.journal.schema import BeginRecord, MergeRecord, Record, RecordError, parse_record

Buffer = bytes | mmap.mmap
DDL = """
DROP TABLE IF EXISTS ops; DROP TABLE IF EXISTS fails; DROP TABLE IF EXISTS meta;
DROP TABLE IF EXISTS profiles;
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE ops(
  row INTEGER PRIMARY KEY, place INTEGER NOT NULL, op TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
  status TEXT NOT NULL, live INTEGER NOT NULL, ts TEXT NOT NULL, running TEXT,
  count INTEGER NOT NULL, offsets BLOB NOT NULL, after INTEGER NOT NULL, name TEXT, hash TEXT,
  pre INTEGER, own INTEGER, why TEXT, block TEXT, arm TEXT);
CREATE INDEX ops_place ON ops(place);
CREATE INDEX ops_live ON ops(place) WHERE live = 1;
CREATE INDEX ops_good ON ops(place) WHERE own != 0;
CREATE INDEX ops_hash ON ops(hash, own, place);
CREATE INDEX ops_name ON ops(name, place);
CREATE INDEX ops_block ON ops(block, arm, hash);
CREATE TABLE fails(op TEXT NOT NULL, gate INTEGER NOT NULL, hash TEXT, what TEXT NOT NULL);
CREATE INDEX fails_hash ON fails(hash);
CREATE INDEX fails_op ON fails(op, gate);
"""
_UPSERT = (
    "INSERT OR REPLACE INTO ops(row, place, op, kind, status, live, ts, running, count, offsets,"
    " after, name, hash, pre, own, why, block, arm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?, ?, ?, ?, ?, ?)"
)
JUDGED = (Kind.DEPLOY, Kind.ROLLBACK, Kind.EXPERIMENT)  # the kinds whose gates count


class Stale(Exception):
    """An indexed offset does not hold the record the index says: rebuild from a full scan."""


@dataclass
class State:
    """What the rows cover besides themselves (table `meta`: one JSON value and its sha256)."""

    size: int = 0  # the record's bytes indexed
    window: str = field(default_factory=lambda: recordfile.window_of(b""))
    lines: int = 0
    records: int = 0
    ops: int = 0  # rows (their places are 0 .. ops-1)
    merges: list[int] = field(default_factory=list)  # offsets of the merge records
    merged: list[str] = field(default_factory=list)  # ops a merge brought in
    merged_ts: str = ""  # the latest begin of a merged operation (where a new one is placed)
    skipped: list[int] = field(default_factory=list)  # torn line numbers
    damaged: list[damage.Damaged] = field(default_factory=list)  # [line, "file:line: why"]
    # An op id begun again -> the lines from that second begin on (another operation's records
    # under its id, never read as the first one's: issue 39, they hid a known-good).
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    orphans: dict[str, list[int]] = field(default_factory=dict)  # op -> lines: no begin read

    def copy(self) -> State:
        return copy.deepcopy(self)


def record_at(buf: Buffer, offset: int, op: str | None) -> Record:
    """The record whose line starts at `offset`; Stale unless it is a valid record (of `op`)."""
    end = buf.find(b"\n", offset)
    raw = buf[offset : end if end >= 0 else len(buf)]
    try:
        rec = parse_record(json.loads(raw), f"@{offset}")
    except (ValueError, UnicodeDecodeError, RecordError):
        raise Stale(f"no record at byte {offset}") from None
    if op is not None and rec.op != op:
        raise Stale(f"the record at byte {offset} is not one of {op}'s")
    return rec


def facts(o: Operation) -> tuple[object, ...]:
    """What `o`'s row keeps of it (kind, status, live, ts, running, name, hash, pre, own, why,
    block, arm): its own records' facts only, so no other operation's records change them.
    pre/own/why: knowngood.own_facts (deploys and rollbacks); block/arm: the experiment its
    reason makes it a block of, and which arm."""
    name = (o.profile or {}).get("name")
    judged: tuple[bool | None, int | None, str | None] = (None, None, None)
    block: str | None = None
    arm: str | None = None
    if o.kind in (Kind.DEPLOY, Kind.ROLLBACK):
        judged = knowngood.own_facts(o)
    reason = o.reason or ""
    if o.kind is Kind.DEPLOY and reason.startswith("experiment ") and ": block " in reason:
        named = reason.removeprefix("experiment ").split(": block ", 1)[0]
        arm = knowngood.arm_of(o, named)
        block = named if arm else None
    status = (o.status.value, int(not o.status.terminal))
    who = (name if isinstance(name, str) else None, knowngood.commands_hash(o))
    return (o.kind.value, *status, o.ts, o.running, *who, *judged, block, arm)


def fails(o: Operation) -> list[tuple[str, int, str | None, str]]:
    """(op, which of its failed gates, the commands or None, which gate) of `o`'s failed gates."""
    if o.kind not in JUDGED:
        return []
    failed = (g for g in o.gates if g.failed)
    return [(o.op, i, *knowngood.own_failure(o, g)) for i, g in enumerate(failed)]


def _lines(
    db: sqlite3.Connection, st: State, buf: Buffer, span: tuple[int, int], path: str
) -> tuple[dict[str, list[tuple[int, Record]]], set[str], int]:
    """(op -> its records among the lines of `span`, the ops begun after the first merge,
    how many lines) read into `st` (damage, merges, counts)."""
    start, end = span
    touched: dict[str, list[tuple[int, Record]]] = {}
    after: set[str] = set()
    pieces = buf[start:end].split(b"\n") if end > start else []
    if pieces and buf[end - 1 : end] == b"\n":
        pieces.pop()  # the empty piece after the last newline
    offset = start
    for n, raw in enumerate(pieces, start=st.lines + 1):
        at, offset = offset, offset + len(raw) + 1
        rec = damage.read_line(raw, f"{path}:{n}", st.skipped, st.damaged)
        if rec is None:
            continue
        st.records += 1
        if isinstance(rec, MergeRecord):
            st.merges.append(at)
            st.merged += [o for o in dict.fromkeys(rec.ops) if o not in st.merged]
            continue
        begun = rec.op in touched or (
            st.ops > 0 and db.execute("SELECT 1 FROM ops WHERE op = ?", (rec.op,)).fetchone()
        )
        if isinstance(rec, BeginRecord) and st.merges:
            after.add(rec.op)  # (a second begin too: place_by's rule reads every begin)
        if not damage.its_own(rec, f"{path}:{n}", bool(begun), st.duplicates, st.orphans):
            continue
        touched.setdefault(rec.op, []).append((at, rec))
    return touched, after, len(pieces)


def fold(
    db: sqlite3.Connection, st: State, buf: Buffer, span: tuple[int, int], fd: int, path: str
) -> None:
    """Fold the lines of buf[start:end] into the rows (in the caller's transaction) and `st`:
    the operations they touch are re-folded from all their records. Raises Stale."""
    merges = len(st.merges)
    touched, after, lines = _lines(db, st, buf, span, path)
    again = len(st.merges) > merges  # a merge record: every row placed anew
    rows, failures, merged = [], [], set(st.merged)
    for op, new in touched.items():
        old = db.execute("SELECT row, place, offsets, after FROM ops WHERE op = ?", (op,))
        row, place, blob, later = old.fetchone() or (st.ops, st.ops, b"", 0)
        offs = array("q", blob).tolist()
        o = fold_into([record_at(buf, x, op) for x in offs] + [r for _, r in new])[op]
        if row == st.ops:  # begun now: last, unless place_by puts it before a merged one
            st.ops += 1
            again = again or bool(merged and (op in merged or o.ts < st.merged_ts))
        offs += [x for x, _ in new]
        got = facts(o)
        blob = array("q", offs).tobytes()
        rows.append((row, place, op, *got[:5], len(offs), blob, later or op in after, *got[5:]))
        failures += fails(o)
    for op in after.difference(touched):  # an id begun again after a merge: placed anew
        flag = db.execute("UPDATE ops SET after = 1 WHERE op = ? AND after = 0", (op,))
        again = again or flag.rowcount > 0
    db.executemany(_UPSERT, rows)
    db.executemany("DELETE FROM fails WHERE op = ?", [(op,) for op in touched])
    db.executemany("INSERT INTO fails VALUES (?, ?, ?, ?)", failures)
    if again and merged:
        _place(db, st)
    st.lines += lines
    st.size = span[1]
    st.window = recordfile.window_sha256(fd, span[1])


def place_by(
    ops: list[tuple[str, str]], merged: set[str], after_first_merge: set[str]
) -> list[int]:
    """The journal's order of `ops` ((op id, begin time) in begin order) as indexes into it:
    each one a merge brought in (`merged`) placed by its begin time among the others. The
    target's own records are in the order they happened (one writer at a time, under the deploy
    lock), so their order stands; an operation merged from an operator-side journal was appended
    later than it happened. One begun after the first merge record (`after_first_merge`) began
    after every operation that merge brought in (the merge is the first thing a command does):
    it follows them even within one second."""
    after_merge = after_first_merge - merged
    out = [i for i, (op, _) in enumerate(ops) if op not in merged]
    for i, (op, ts) in enumerate(ops):
        if op in merged:
            later = (
                at
                for at, j in enumerate(out)
                if ops[j][1] > ts or (ops[j][0] in after_merge and ops[j][1] >= ts)
            )
            out.insert(next(later, len(out)), i)
    return out


def _place(db: sqlite3.Connection, st: State) -> None:
    """Place every row anew (place_by: a merge brought operations in)."""
    got = db.execute("SELECT row, op, ts, after FROM ops ORDER BY row").fetchall()
    merged = set(st.merged)
    order = place_by([(op, ts) for _, op, ts, _ in got], merged, {op for _, op, _, a in got if a})
    db.executemany(
        "UPDATE ops SET place = ? WHERE row = ?", [(i, got[k][0]) for i, k in enumerate(order)]
    )
    st.merged_ts = max((ts for _, op, ts, _ in got if op in merged), default="")


def create(db: sqlite3.Connection) -> None:
    for stmt in filter(str.strip, DDL.split(";")):
        db.execute(stmt)  # (executescript would commit first)


def scan(fd: int, buf: Buffer, end: int, path: str) -> tuple[sqlite3.Connection, State]:
    """The rows built in memory (the index file cannot be written): one full scan."""
    db, st = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False), State()
    create(db)
    fold(db, st, buf, (0, end), fd, path)
    return db, st


def partial(
    db: sqlite3.Connection, st: State, buf: Buffer, span: tuple[int, int], fd: int, path: str
) -> sqlite3.Connection:
    """`db` with the partial last line buf[start:end] read into `st` (a copy: never kept):
    torn or damaged, noted; a record (a writer caught mid-line), folded into a copy of the
    rows in memory."""
    raw = buf[span[0] : span[1]]
    if damage.read_line(raw, f"{path}:{st.lines + 1}", [], []) is None:
        damage.read_line(raw, f"{path}:{st.lines + 1}", st.skipped, st.damaged)
        st.lines, st.size = st.lines + 1, span[1]
        return db
    mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.backup(mem)
    mem.execute("BEGIN")
    fold(mem, st, buf, span, fd, path)
    mem.execute("COMMIT")
    return mem
