"""The index file's column sections (journal/entries.py's Table, journal/index.py's format 3).

One section per column, in this order: op ids (JSON), begin times (JSON), kinds and statuses (one
byte each: codes into entries.KINDS / STATUSES, which the header names), running (JSON), record
counts and record offsets (int64), the views' JSON texts (their profile left out: the profile
table has it) and their lengths (int64), profile ids (int32, -1 none) and the profile table
(JSON). Integers are little-endian. Writing patches the columns that were read with the entries
folded in since, so an append's save copies the columns, not a Python loop over every entry.
"""

from __future__ import annotations

import json
import sys
from array import array

from dsv4ops.journal.entries import KINDS, STATUSES, Cols, Entry, Table, profile_key
from dsv4ops.jsontypes import JSONObject

SECTIONS = 11
_DUMPS = json.JSONEncoder(separators=(",", ":")).encode


def _raw(a: array[int] | bytearray) -> bytes:
    if isinstance(a, bytearray):
        return bytes(a)
    if sys.byteorder == "big":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _ints(code: str, raw: bytes | memoryview) -> array[int]:
    out = array(code)
    out.frombytes(raw)
    if sys.byteorder == "big":
        out.byteswap()
    return out


def _view_json(e: Entry) -> bytes:
    v = e.view
    return _DUMPS([None, *v[1:]]).encode() if v is not None else b""


class _Patch:
    """The columns being written: the read ones, copied, with folded entries set in."""

    def __init__(self, c: Cols) -> None:
        self.c = c
        self.ops, self.ts, self.running = list(c.ops), list(c.ts), list(c.running)
        self.kinds, self.statuses = bytearray(c.kinds), bytearray(c.statuses)
        self.counts, self.lengths = array("q", c.counts), array("q", c.lengths)
        self.pids, self.profiles = array("i", c.pids), list(c.profiles)
        self.pkey = {profile_key(p): i for i, p in enumerate(self.profiles)}
        self.flat: list[array[int]] = []
        self.blob: list[bytes] = []
        self.done = 0  # columns' rows copied into flat/blob so far

    def pid(self, e: Entry) -> int:
        v = e.view
        if v is None or v[0] is None:
            return -1
        key = profile_key(v[0])
        if key not in self.pkey:
            self.pkey[key] = len(self.profiles)
            self.profiles.append(v[0])
        return self.pkey[key]

    def copy_upto(self, row: int) -> None:
        c = self.c
        if row > self.done:
            self.flat.append(c.flat[c.starts[self.done] : c.starts[row]])
            self.blob.append(c.blob[c.vstarts[self.done] : c.vstarts[row]])
        self.done = max(self.done, row)

    def put(self, row: int, e: Entry) -> None:
        """Row `row` (a column's own, or the next new one) is `e`."""
        view = _view_json(e)
        if row < self.c.n:
            self.copy_upto(row)
            self.done = row + 1
        else:  # a new row: placeholders, set below
            self.ops.append(e.op)
            self.ts.append(e.ts)
            self.running.append(None)
            self.kinds.append(0)
            self.statuses.append(0)
            for icol in (self.counts, self.lengths, self.pids):
                icol.append(0)
        self.ops[row], self.ts[row], self.running[row] = e.op, e.ts, e.running
        self.kinds[row], self.statuses[row] = KINDS.index(e.kind), STATUSES.index(e.status)
        self.counts[row], self.lengths[row], self.pids[row] = e.count, len(view), self.pid(e)
        self.flat.append(array("q", e.offsets))
        self.blob.append(view)


def encode(t: Table) -> list[bytes]:
    """The column lines of `t`."""
    p = _Patch(t.cols)
    for row in sorted(t.over):
        p.put(row, t.over[row])
    p.copy_upto(t.cols.n)
    for i, e in enumerate(t.new):
        p.put(t.cols.n + i, e)
    flat = array("q")
    for piece in p.flat:
        flat.extend(piece)
    return [
        _DUMPS(p.ops).encode(),
        _DUMPS(p.ts).encode(),
        bytes(p.kinds),
        bytes(p.statuses),
        _DUMPS(p.running).encode(),
        _raw(p.counts),
        _raw(flat),
        b"".join(p.blob),
        _raw(p.lengths),
        _raw(p.pids),
        _DUMPS(p.profiles).encode(),
    ]


def decode(sections: list[memoryview], header: JSONObject) -> Table | None:
    """The Table `sections` hold; None for anything this code would not have written (raises
    ValueError/TypeError/KeyError for garbage: the caller's None too)."""
    if header["kinds"] != KINDS or header["statuses"] != STATUSES or len(sections) != SECTIONS:
        return None  # codes this code does not read the same way: rebuilt
    ops = json.loads(bytes(sections[0]))
    c: JSONObject = {
        "ops": ops,
        "ts": bytes(sections[1]),
        "kinds": bytes(sections[2]),
        "statuses": bytes(sections[3]),
        "running": bytes(sections[4]),
        "counts": _ints("q", sections[5]),
        "flat": _ints("q", sections[6]),
        "blob": bytes(sections[7]),
        "lengths": _ints("q", sections[8]),
        "pids": _ints("i", sections[9]),
        "profiles": json.loads(bytes(sections[10])),
    }
    n = len(ops)
    if not (
        isinstance(ops, list)
        and all(len(c[k]) == n for k in ("kinds", "statuses", "counts", "lengths", "pids"))
        and (not n or (max(c["kinds"]) < len(KINDS) and max(c["statuses"]) < len(STATUSES)))
        and (not n or (min(c["counts"]) >= 0 and min(c["lengths"]) >= 0))
        and sum(c["counts"]) == len(c["flat"])
        and sum(c["lengths"]) == len(c["blob"])
        and (not n or -1 <= min(c["pids"]) <= max(c["pids"]) < len(c["profiles"]))
    ):
        return None
    return Table(Cols(c))
