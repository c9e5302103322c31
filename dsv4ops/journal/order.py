"""The index's entries in the journal's order (entries.Table, placed): walks by kind, status or
profile read the one-byte codes (a mask, then `find`), never one Entry per operation."""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Collection, Iterator, Sequence
from typing import NamedTuple, overload

from dsv4ops.journal import checkpoint
from dsv4ops.journal.entries import KINDS, STATUSES, Entry, Table
from dsv4ops.journal.records import Status, place_by
from dsv4ops.jsontypes import JSONObject

_TERMINAL = frozenset(s.value for s in Status if s.terminal)


class _Row(NamedTuple):
    op: str
    ts: str
    row: int


def _table(ok: Collection[str] | None, names: list[str]) -> bytes:
    """bytes.translate's table: code -> 1 when its name is in `ok` (None: every code)."""
    return bytes(1 if i < len(names) and (ok is None or names[i] in ok) else 0 for i in range(256))


def _and(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") & int.from_bytes(b, "big")).to_bytes(len(a), "big")


class Placed(Sequence[Entry]):
    """The table in the journal's order (`perm`: the rows placed; None: begin order)."""

    def __init__(self, table: Table, merged: set[str], after_first_merge: set[str]) -> None:
        self.table = table
        self.perm: list[int] | None = None
        if merged:
            rows = [_Row(table.op_at(r), table.ts_at(r), r) for r in range(len(table))]
            self.perm = [x.row for x in place_by(rows, merged, after_first_merge)]

    def __len__(self) -> int:
        return len(self.table)

    def row(self, pos: int) -> int:
        return pos if self.perm is None else self.perm[pos]

    @overload
    def __getitem__(self, i: int) -> Entry: ...
    @overload
    def __getitem__(self, i: slice) -> list[Entry]: ...

    def __getitem__(self, i: int | slice) -> Entry | list[Entry]:
        if isinstance(i, slice):
            return [self.table.at(self.row(p)) for p in range(len(self))[i]]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.table.at(self.row(i % len(self)))

    def __iter__(self) -> Iterator[Entry]:
        return (self.table.at(self.row(p)) for p in range(len(self)))

    def __reversed__(self) -> Iterator[Entry]:
        return (self.table.at(self.row(p)) for p in reversed(range(len(self))))

    def op_at(self, pos: int) -> str:
        return self.table.op_at(self.row(pos))

    def _placed(self, by_row: bytes) -> bytes:
        return by_row if self.perm is None else bytes(by_row[r] for r in self.perm)

    def positions(
        self,
        *,
        kinds: Collection[str] | None = None,
        status: str | None = None,
        terminal: bool | None = None,
        profile: JSONObject | None = None,
        newest_first: bool = False,
    ) -> Iterator[int]:
        """The positions whose indexed kind/status match (and whose indexed profile, if they
        keep one, has the `profile` values), read off the columns: no Entry is made."""
        kind_codes, status_codes = self.table.codes()
        statuses = None if status is None else {status}
        if terminal is not None:
            wanted = {s for s in STATUSES if (s in _TERMINAL) == terminal}
            statuses = wanted if statuses is None else statuses & wanted
        mask = _and(
            kind_codes.translate(_table(kinds, KINDS)),
            status_codes.translate(_table(statuses, STATUSES)),
        )
        if profile:
            mask = _and(mask, self.table.profile_ok(profile))
        mask = self._placed(mask)
        if newest_first:
            at = mask.rfind(1)
            while at >= 0:
                yield at
                at = mask.rfind(1, 0, at)
        else:
            at = mask.find(1)
            while at >= 0:
                yield at
                at = mask.find(1, at + 1)

    def digest(self, upto: int) -> str:
        """checkpoint.proof of the first `upto` entries, read off the columns."""
        t = self.table
        if self.perm is None:
            ops = list(itertools.islice(iter(t), upto))
            return checkpoint.digest(ops, t.counts(upto))
        rows = self.perm[:upto]
        every = t.counts(len(t))
        return checkpoint.digest([t.op_at(r) for r in rows], array("q", [every[r] for r in rows]))
