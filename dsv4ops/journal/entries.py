"""The journal index's entries as columns (journal/index.py, format 3; issue 21: a cold read of a
10^6-record journal decodes only the entries it shows).

`Cols` is what one index file holds, one column per field, in begin order: op ids, begin times,
kinds and statuses (one byte each, codes into the header's tables), what each left running,
record counts and every record's byte offset (int64), what the known-good rule reads of each
deploy/rollback/experiment (its `knowngood.essentials`, one JSON text per entry, decoded only
when that entry's `view` is read) and its profile as an id into a table of distinct profiles
(what `Operations.newest_first` filters on without decoding an entry). `Table` is those columns
plus the entries folded in since they were read (replaced or new); an `Entry` object is made
only for a row somebody asks for. `Placed` is the table in the journal's order (merged
operations placed by records.place_by) with column reads by position.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
from array import array
from collections.abc import Iterator

from dsv4ops.journal.records import Kind, Operation, Status, StepRecord
from dsv4ops.jsontypes import JSONObject, JSONValue

KINDS = [k.value for k in Kind]
STATUSES = [s.value for s in Status]
_KINDS = {k.value: k for k in Kind}  # a dict lookup: Enum(value) costs ~1 us per call
_STATUSES = {s.value: s for s in Status}
_TERMINAL = frozenset(s.value for s in Status if s.terminal)
_NO_VIEW: list[JSONValue] = [None, False, None, None, False, []]
_DUMPS = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode
_SCANS = 8  # lookups by op id answered by a scan before the id -> row dict is made
JUDGED = (Kind.DEPLOY.value, Kind.ROLLBACK.value, Kind.EXPERIMENT.value)  # those with a view
_VIEWLESS = bytes(  # bytes.translate: kind code -> 1 for the kinds that keep no view
    1 if i >= len(KINDS) or KINDS[i] not in JUDGED else 0 for i in range(256)
)
_LOW = 0 if sys.byteorder == "little" else 3  # the low byte of an int32 in memory


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
        "_flat",
        "_at",
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
        offsets: list[int] | None,
        *,
        count: int,
        raw: bytes = b"",
        flat: array[int] | None = None,
        at: int = 0,
        profile: JSONObject | None = None,
    ) -> None:
        self.op, self.kind, self.ts, self.status, self.running = op, kind, ts, status, running
        self.count = count  # how many records
        self._view, self._raw = view, raw  # raw: the view's JSON, not decoded yet
        self._profile = profile  # the raw view's profile (the index keeps a table of them)
        self._offsets, self._flat, self._at = offsets, flat, at
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
        """Where each of its records' lines starts (sliced from the column when asked)."""
        if self._offsets is None:
            assert self._flat is not None
            self._offsets = self._flat[self._at : self._at + self.count].tolist()
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
                [StepRecord(n, p, "", None, d) for n, p, d in v[5]] if v[5] else [],
                scope=v[2],
                marked_known_good=bool(v[4]),
            )
        return self._view_op


def _sums(lengths: array[int]) -> array[int]:
    return array("q", itertools.accumulate(lengths, initial=0))


class Cols:
    """The columns of one index file (read-only). ts and running are JSON decoded when first
    read; the file's body hash (journal/index.py) has proven them already."""

    def __init__(self, c: JSONObject) -> None:
        self.n: int = len(c["ops"])
        self.ops: list[str] = c["ops"]
        self.kinds: bytes = c["kinds"]
        self.statuses: bytes = c["statuses"]
        self.counts: array[int] = c["counts"]
        self.flat: array[int] = c["flat"]
        self.blob: bytes = c["blob"]
        self.lengths: array[int] = c["lengths"]
        self.pids: array[int] = c["pids"]
        self.profiles: list[JSONObject | None] = c["profiles"]
        self._ts_raw: bytes = c["ts"]
        self._running_raw: bytes = c["running"]
        self._ts: list[str] | None = None
        self._running: list[str | None] | None = None
        self.starts, self.vstarts = _sums(self.counts), _sums(self.lengths)
        self._rows: dict[str, int] | None = None
        self._scans = 0
        self.made: dict[int, Entry] = {}  # rows made into Entries (shared by a Table's copies)

    def row(self, op: str) -> int | None:
        """The row of `op`: the first few found by a scan of the ids (in C, a few ms at 10^6
        records), the rest through `rows` (made once: a command that asks often pays it once)."""
        if self._rows is None and self._scans < _SCANS:
            self._scans += 1
            with contextlib.suppress(ValueError):
                return self.ops.index(op)
            return None
        return self.rows.get(op)

    @property
    def rows(self) -> dict[str, int]:
        """op id -> row (made when first asked: a walk by position needs none)."""
        if self._rows is None:
            self._rows = dict(zip(self.ops, range(self.n), strict=True))
        return self._rows

    @property
    def ts(self) -> list[str]:
        if self._ts is None:
            self._ts = json.loads(self._ts_raw)
        return self._ts

    @property
    def running(self) -> list[str | None]:
        if self._running is None:
            self._running = json.loads(self._running_raw)
        return self._running

    def entry(self, row: int) -> Entry:
        e = self.made.get(row)
        if e is None:
            vs, ve = self.vstarts[row], self.vstarts[row + 1]
            e = Entry(
                self.ops[row],
                KINDS[self.kinds[row]],
                self.ts[row],
                STATUSES[self.statuses[row]],
                self.running[row],
                None,
                None,
                count=self.counts[row],
                raw=self.blob[vs:ve],
                flat=self.flat,
                at=self.starts[row],
                profile=self.profiles[self.pids[row]] if self.pids[row] >= 0 else None,
            )
            self.made[row] = e
        return e


EMPTY: JSONObject = {
    "ops": [],
    "ts": b"[]",
    "running": b"[]",
    "kinds": b"",
    "statuses": b"",
    "counts": array("q"),
    "flat": array("q"),
    "blob": b"",
    "lengths": array("q"),
    "pids": array("i"),
    "profiles": [],
}


class Table:
    """op id -> Entry in begin order: the file's columns plus the entries folded in since."""

    def __init__(self, cols: Cols | None = None) -> None:
        self.cols = cols or Cols(EMPTY)
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

    def profile_ok(self, wanted: JSONObject) -> bytes:
        """Per row, 1 unless it keeps a view whose profile has other `wanted` values."""
        c = self.cols

        def ok(p: JSONObject | None) -> bool:
            return all((p or {}).get(k) == v for k, v in wanted.items())

        by_pid = [ok(p) for p in c.profiles] + [ok(None)]  # pid -1: no profile
        if len(c.profiles) < 255:  # one byte per pid (-1: 255): masks made in C
            table = bytes(by_pid[i] if i < len(c.profiles) else by_pid[-1] for i in range(256))
            low = c.pids.tobytes()[_LOW::4].translate(table)
            viewless = c.kinds.translate(_VIEWLESS)
            either = int.from_bytes(low, "big") | int.from_bytes(viewless, "big")
            out = bytearray(either.to_bytes(c.n, "big"))
        else:
            out = bytearray(
                1 if not n or by_pid[p] else 0 for n, p in zip(c.lengths, c.pids, strict=True)
            )
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


def profile_key(profile: JSONObject | None) -> str:
    return _DUMPS(profile)
