"""The index's entries: `Cols`, the cache's rows in begin order (op ids, kind/status codes and
record counts loaded whole, the rest of a row read when its Entry is made), and `Table`, those
rows plus the entries folded in since (an Entry made only for a row somebody asks for)."""

from __future__ import annotations

import itertools
import json
from array import array
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from dsv4ops.journal.gates import GateResult
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.jsontypes import JSONObject, JSONValue

KINDS = [k.value for k in Kind]
STATUSES = [s.value for s in Status]
_KINDS = {k.value: k for k in Kind}  # a dict lookup: Enum(value) costs ~1 us per call
_STATUSES = {s.value: s for s in Status}
_TERMINAL = frozenset(s.value for s in Status if s.terminal)
_NO_VIEW: list[JSONValue] = [None, False, None, None, False, []]
_DUMPS = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
JUDGED = (Kind.DEPLOY.value, Kind.ROLLBACK.value, Kind.EXPERIMENT.value)  # those with a view
_VIEWLESS = bytes(  # bytes.translate: kind code -> 1 for the kinds that keep no view
    1 if i >= len(KINDS) or KINDS[i] not in JUDGED else 0 for i in range(256)
)


class Entry:
    """One operation as the index keeps it (a new Entry whenever its records change)."""

    __slots__ = (
        "op",
        "kind",
        "ts",
        "status",
        "running",
        "count",
        "_view",
        "_raw",
        "_offsets",
        "_view_op",
        "_profile",
    )

    def __init__(
        self,
        op: str,
        kind: str,
        ts: str,
        status: str,
        running: str | None,
        view: list[JSONValue] | None,
        offsets: list[int],
        *,
        count: int,
        raw: bytes = b"",
        profile: JSONObject | None = None,
    ) -> None:
        self.op, self.kind, self.ts, self.status, self.running = op, kind, ts, status, running
        self.count = count  # how many records
        self._view, self._raw = view, raw  # raw: the view's JSON, not decoded yet
        self._profile = profile  # the raw view's profile (the index keeps a table of them)
        self._offsets = offsets
        self._view_op: Operation | None = None

    @property
    def view(self) -> list[JSONValue] | None:
        """knowngood.essentials, serialised (deploy, rollback, experiment; None for others)."""
        if self._raw:
            view = json.loads(self._raw)
            view[0] = dict(self._profile) if self._profile is not None else None
            self._view, self._raw = view, b""
        return self._view

    @property
    def offsets(self) -> list[int]:
        """Where each of its records' lines starts."""
        return self._offsets

    @property
    def terminal(self) -> bool:
        return self.status in _TERMINAL

    def essentials(self) -> Operation:
        """The reduced Operation the known-good rule judges (built once per Entry)."""
        if self._view_op is None:
            v = self.view or _NO_VIEW
            self._view_op = Operation(
                self.op,
                _KINDS[self.kind],
                self.ts,
                "",
                _STATUSES[self.status],
                v[0],
                [{}] if v[1] else [],
                v[3],
                None,
                scope=v[2],
                marked_known_good=bool(v[4]),
                gates=[GateResult.from_record(g, self.op) for g in v[5]] if v[5] else [],
            )
        return self._view_op


class Rows(Protocol):
    """Where the rest of a row is read (journal/cache.py's Cache)."""

    def entry(self, row: int, cols: Cols) -> Entry: ...
    def row(self, op: str, below: int) -> int | None: ...
    def column_ts(self) -> list[str]: ...
    def profiled(
        self, ok: Callable[[Mapping[str, object] | None], bool], below: int
    ) -> list[int]: ...


class Cols:
    """The rows of the cache as journal/cache.py read them (read-only): the columns every walk
    reads (op ids, kinds and statuses as one-byte codes, record counts, profile ids), loaded
    whole; the rest of a row (begin time, running, offsets, view) read when its Entry is made,
    a row by op id through the cache's index on it (None: no cache, no rows)."""

    def __init__(
        self,
        rows: Rows | None,
        ops: list[str],
        kinds: bytes,
        statuses: bytes,
        counts: array[int],
    ) -> None:
        self.n, self._rows = len(ops), rows
        self.ops, self.kinds, self.statuses, self.counts = ops, kinds, statuses, counts
        self._ts: list[str] | None = None
        self.made: dict[int, Entry] = {}  # rows made into Entries (shared by a Table's copies)

    def row(self, op: str) -> int | None:
        return None if self._rows is None else self._rows.row(op, self.n)

    @property
    def ts(self) -> list[str]:
        if self._ts is None:
            self._ts = [] if self._rows is None else self._rows.column_ts()
        return self._ts

    def entry(self, row: int) -> Entry:
        e = self.made.get(row)
        if e is None:
            if self._rows is None:
                raise IndexError(row)
            e = self.made[row] = self._rows.entry(row, self)
        return e

    def profiled(self, ok: Callable[[Mapping[str, object] | None], bool]) -> list[int]:
        """The rows whose profile is one that `ok` (no profile: None)."""
        return [] if self._rows is None else self._rows.profiled(ok, self.n)


EMPTY = Cols(None, [], b"", b"", array("q"))


class Table:
    """op id -> Entry in begin order: the file's columns plus the entries folded in since."""

    def __init__(self, cols: Cols | None = None) -> None:
        self.cols = cols or EMPTY
        self.over: dict[int, Entry] = {}  # rows of the columns replaced by a fold
        self.new: list[Entry] = []  # entries begun after the columns (rows n, n+1, ...)
        self._new_rows: dict[str, int] = {}
        self._codes: tuple[bytes, bytes] | None = None

    def copy(self) -> Table:
        out = Table(self.cols)
        out.over, out.new, out._new_rows = dict(self.over), list(self.new), dict(self._new_rows)
        return out

    def __len__(self) -> int:
        return self.cols.n + len(self.new)

    def __iter__(self) -> Iterator[str]:
        return itertools.chain(self.cols.ops, (e.op for e in self.new))

    def values(self) -> Iterator[Entry]:
        return (self.at(r) for r in range(len(self)))

    def row(self, op: str) -> int | None:
        r = self._new_rows.get(op)
        return self.cols.row(op) if r is None else r

    def get(self, op: str) -> Entry | None:
        r = self.row(op)
        return None if r is None else self.at(r)

    def __setitem__(self, op: str, e: Entry) -> None:
        self._codes = None
        r = self.row(op)
        if r is None:
            self._new_rows[op] = len(self)
            self.new.append(e)
        elif r >= self.cols.n:
            self.new[r - self.cols.n] = e
        else:
            self.over[r] = e

    def at(self, row: int) -> Entry:
        n = self.cols.n
        if row >= n:
            return self.new[row - n]
        e = self.over.get(row)
        return self.cols.entry(row) if e is None else e

    def op_at(self, row: int) -> str:
        return self.cols.ops[row] if row < self.cols.n else self.new[row - self.cols.n].op

    def ts_at(self, row: int) -> str:
        """The begin time of `row` (no Entry made for a row of the columns)."""
        if row >= self.cols.n or row in self.over:
            return self.at(row).ts
        return self.cols.ts[row]

    def codes(self) -> tuple[bytes, bytes]:
        """(every row's kind code, every row's status code): one byte each, by row."""
        if self._codes is None:
            kinds, statuses = bytearray(self.cols.kinds), bytearray(self.cols.statuses)
            for r, e in self.over.items():
                kinds[r], statuses[r] = KINDS.index(e.kind), STATUSES.index(e.status)
            kinds += bytes(KINDS.index(e.kind) for e in self.new)
            statuses += bytes(STATUSES.index(e.status) for e in self.new)
            self._codes = bytes(kinds), bytes(statuses)
        return self._codes

    def profile_ok(self, wanted: Mapping[str, object]) -> bytes:
        """Per row, 1 unless it keeps a view whose profile has other `wanted` values."""
        c = self.cols

        def ok(p: Mapping[str, object] | None) -> bool:
            return all((p or {}).get(k) == v for k, v in wanted.items())

        out = bytearray(c.kinds.translate(_VIEWLESS))
        for r in c.profiled(ok):
            out[r] = 1
        for r, e in self.over.items():
            out[r] = e.view is None or ok(e.view[0])
        out += bytes(e.view is None or ok(e.view[0]) for e in self.new)
        return bytes(out)

    def counts(self, upto: int) -> array[int]:
        out = array("q", self.cols.counts[:upto])
        for r, e in self.over.items():
            if r < upto:
                out[r] = e.count
        out.extend(e.count for e in self.new[: max(0, upto - self.cols.n)])
        return out


def profile_key(profile: Mapping[str, object] | None) -> str:
    return _DUMPS(profile)
