"""One read of a journal through its index: each operation folded from its records when first
read (its row checked against them), and the known-good rule judged per row when asked.
docs/deploy.md, "The journal: record, index, judge"."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import NoReturn

from dsv4ops.errors import JournalError
from dsv4ops.journal import damage, index, knowngood, rows
from dsv4ops.journal.knowngood import INHERITS
from dsv4ops.journal.lazy import GOOD, Entry, facts_of, fits
from dsv4ops.journal.records import Judgement, Operation, fold_into
from dsv4ops.journal.schema import Record

_ROW = (
    "op, kind, status, live, ts, running, count, offsets, place, name, hash, pre, own, why, block,"
    " arm"
)
_BATCH = 64


class View:
    """The journal as one read found it (a later read makes a new View)."""

    def __init__(self, idx: index.Index, cache: dict[tuple[str, int], Operation]) -> None:
        self._index = idx
        self._cache = cache  # (op, records folded) -> Operation, shared by a Journal's views
        self.generation = -1  # how many times this view's index was rebuilt under it
        self._read()

    def _read(self) -> None:
        self.db, self.state, self.buf = self._index.current()
        self.n = self.state.ops
        self.generation += 1
        self._judged: dict[str, Judgement] = {}
        self._exp: dict[str, bool] = {}
        self._fails: dict[str, str | None] = {}

    def q(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        """A query of the index; JournalError if SQLite finds it damaged meanwhile."""
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            self._damaged(f"SQLite: {exc}")

    def _damaged(self, why: str) -> NoReturn:
        with contextlib.suppress(OSError):
            self._index.remove()  # the next command rebuilds it
        raise JournalError(
            f"the journal's index {self._index.file} was damaged while it was read ({why}); "
            "it was removed",
            hint="run the command again: the index is rebuilt from the journal itself",
        )

    def _entry(self, r: tuple[object, ...]) -> Entry:
        if not fits(r):
            self._damaged(f"a row is not one this code wrote: {r[0]!r}")
        return Entry(*r)  # type: ignore[arg-type]

    def entry(self, op: str) -> Entry | None:
        hit = self.q(f"SELECT {_ROW} FROM ops WHERE op = ? AND place < ?", op, self.n)  # noqa: S608
        return self._entry(hit[0]) if hit else None

    def at(self, pos: int) -> Entry:
        hit = self.q(f"SELECT {_ROW} FROM ops WHERE place = ?", pos)  # noqa: S608
        if not hit:
            self._damaged(f"it has no operation at place {pos}")
        return self._entry(hit[0])

    def walk(self, where: str = "1", *args: object, newest_first: bool = False) -> Iterator[Entry]:
        """The entries matching `where`, in the journal's order (or newest first), in batches."""
        edge = self.n if newest_first else -1
        cmp, order = ("<", "DESC") if newest_first else (">", "")
        sql = (
            f"SELECT {_ROW} FROM ops WHERE ({where}) AND place {cmp} ? AND place < {self.n}"  # noqa: S608
            f" ORDER BY place {order} LIMIT {_BATCH}"
        )
        while True:
            got = self.q(sql, *args, edge)
            for r in got:
                yield self._entry(r)
            if len(got) < _BATCH:
                return
            edge = int(got[-1][8])  # type: ignore[call-overload]

    def load(self, entry: Entry, *, retry: bool = True) -> Operation:
        """`entry`'s Operation folded from its records (a row they do not bear out: rebuilt,
        the read retried once)."""
        offsets = [o for o in entry.offsets if o < len(self.buf)]  # appended since: not this read's
        key = (entry.op, len(offsets))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            op = fold_into([rows.record_at(self.buf, o, entry.op) for o in offsets])[entry.op]
            if len(offsets) == entry.count and not self._bears_out(op, entry):
                raise rows.Stale(f"its row of {entry.op} does not match that operation's records")
        except (rows.Stale, KeyError) as exc:
            if not retry:
                raise JournalError(f"{self._index.path} changed while it was read") from None
            self._index.drop(str(exc))  # never trusted: rebuilt by a full scan
            self._read()
            fresh = self.entry(entry.op)
            if fresh is None:
                raise JournalError(f"{self._index.path} changed while it was read") from None
            return self.load(fresh, retry=False)
        self._cache[key] = op
        return op

    def _bears_out(self, op: Operation, entry: Entry) -> bool:
        """Whether `op`, folded from its records, has the facts its row and `fails` say."""
        sql = "SELECT op, gate, hash, what FROM fails WHERE op = ? ORDER BY gate"
        return rows.facts(op) == facts_of(entry) and rows.fails(op) == self.q(sql, op.op)

    # -- the judge ------------------------------------------------------------------------------

    def judge(self, e: Entry) -> Judgement | None:
        """The known-good rule's judgement of `e` (None: not a deploy or rollback)."""
        if e.kind not in ("deploy", "rollback") or e.own is None or e.why is None:
            return None
        j = self._judged.get(e.op)
        if j is not None:
            return j
        if e.pre:
            j = Judgement(e.op, e.own, e.why)
        elif e.block is not None and self._experiment(e.block):
            j = knowngood.arm_judgement(e.op, e.block)
        else:
            j = self._inherited(e) if e.own == INHERITS else Judgement(e.op, e.own, e.why)
            failed = self._failed(e.hash) if j.known_good and e.hash else None
            j = j if failed is None else knowngood.failed_judgement(e.op, failed)
        self._judged[e.op] = j
        return j

    def _experiment(self, op: str) -> bool:
        if op not in self._exp:
            sql = "SELECT 1 FROM ops WHERE op = ? AND kind = 'experiment' AND place < ?"
            self._exp[op] = bool(self.q(sql, op, self.n))
        return self._exp[op]

    def _failed(self, h: str) -> str | None:
        """Which gate failed commands `h` first in the journal's order, None if none did."""
        if h not in self._fails:
            found: list[tuple[tuple[int, int, int], str]] = []
            for place, gate, what in self.q(
                "SELECT o.place, f.gate, f.what FROM fails f JOIN ops o ON o.op = f.op"
                " WHERE f.hash = ? AND o.place < ?",
                h,
                self.n,
            ):
                found.append(((int(place), int(gate), -1), str(what)))  # type: ignore[call-overload]
            for place, gate, what, op, at, name in self.q(
                "SELECT o.place, f.gate, f.what, o.op, d.place, d.name FROM fails f"
                " JOIN ops o ON o.op = f.op JOIN ops d ON d.block = f.op AND d.arm = 'B'"
                " WHERE f.hash IS NULL AND o.kind = 'experiment' AND d.hash = ? AND o.place < ?"
                " AND d.place < ?",
                h,
                self.n,
                self.n,
            ):
                what = knowngood.legacy_ab_failure(str(what), str(op), name)
                found.append(((int(place), int(gate), int(at)), what))  # type: ignore[call-overload]
            self._fails[h] = min(found)[1] if found else None
        return self._fails[h]

    def _inherited(self, e: Entry) -> Judgement:
        """A gateless rollback: the best known-good of its commands before it, the first of
        that rank (an inheriting rollback is never that: it only equals it)."""
        if e.hash is None or self._failed(e.hash) is not None:
            return knowngood.inherited(e.op, None)
        for op, own, why, block in self.q(
            "SELECT op, own, why, block FROM ops WHERE hash = ? AND own > 0 AND place < ?"
            f" AND {GOOD} ORDER BY own DESC, place",
            e.hash,
            e.place,
        ):
            if block is None or not self._experiment(str(block)):
                return knowngood.inherited(e.op, Judgement(str(op), int(own), str(why)))  # type: ignore[call-overload]
        return knowngood.inherited(e.op, None)

    # -- what the store reads -------------------------------------------------------------------

    def count(self, where: str) -> int:
        got = self.q(f"SELECT count(*) FROM ops WHERE ({where}) AND place < ?", self.n)  # noqa: S608
        n = got[0][0]
        return n if isinstance(n, int) else 0

    def newest(self, where: str) -> Entry | None:
        return next(self.walk(where, newest_first=True), None)

    def merges(self) -> list[Record]:
        try:
            return [rows.record_at(self.buf, o, None) for o in self.state.merges]
        except rows.Stale as exc:
            self._index.drop(str(exc))
            self._read()
            return [rows.record_at(self.buf, o, None) for o in self.state.merges]

    def warnings(self) -> list[str]:
        """What this read could not read as the journal says (journal/damage.py)."""
        s = self.state
        return damage.warnings(self._index.path, s.damaged, s.orphans, s.duplicates)

    def tail(self, n: int) -> list[Record]:
        """The last `n` valid records (torn lines skipped), read backwards from the end."""
        out: list[Record] = []
        end = len(self.buf)
        while end > 0 and len(out) < n:
            start = self.buf.rfind(b"\n", 0, max(0, end - 1)) + 1
            if self.buf[start:end].strip():
                with contextlib.suppress(rows.Stale):  # torn or damaged (the index noted it)
                    out.append(rows.record_at(self.buf, start, None))
            end = start
        return out[::-1]
