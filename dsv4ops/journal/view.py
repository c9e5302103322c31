"""One read of a journal through its index: `Operations` (a Sequence in the journal's order,
each folded from its own records when first touched) and `KnownGood`; the known-good
rule judges the index's `knowngood.essentials`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TypeVar, overload

from dsv4ops.errors import JournalError
from dsv4ops.journal import checkpoint, damage, knowngood, recordfile
from dsv4ops.journal.entries import Entry
from dsv4ops.journal.index import JournalIndex, Stale, placed, record_at
from dsv4ops.journal.order import Placed
from dsv4ops.journal.records import Kind, Operation, Status, fold_into
from dsv4ops.journal.schema import Record, RecordError, parse_record
from dsv4ops.jsontypes import JSONObject

T = TypeVar("T")


class View:
    """The journal as one read found it (a later read makes a new View)."""

    def __init__(self, index: JournalIndex, cache: dict[tuple[str, int], Operation]) -> None:
        self._index = index
        self._cache = cache  # (op, records folded) -> Operation, shared by a Journal's views
        self.state, self.buf = index.current()
        self.order: Placed = placed(self.state)

    def load(self, entry: Entry, *, retry: bool = True) -> Operation:
        """The whole Operation of `entry`, folded from its records (rebuilt index: retried once)."""
        key = (entry.op, entry.count)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        try:
            recs = [record_at(self.buf, o, entry.op) for o in entry.offsets]
        except Stale as exc:
            if not retry:
                raise JournalError(f"{self._index.path} changed while it was read") from None
            self._rebuild(exc)  # an edit the size+window proof could not see: never trusted
            fresh = self.state.entries.get(entry.op)
            if fresh is None:
                raise JournalError(f"{self._index.path} changed while it was read") from None
            return self.load(fresh, retry=False)
        op = fold_into(recs)[entry.op]
        self._cache[key] = op
        return op

    def operations(self) -> Operations:
        return Operations(self)

    def essentials(self) -> list[Operation]:
        """What the known-good rule reads of every operation, in the journal's order."""
        return [e.essentials() for e in self.order]

    def judged(self) -> Mapping[str, knowngood.Judgement]:
        """knowngood.judge of the whole journal (its essentials), once per index state: from
        the index's checkpoint and the operations after it (journal/checkpoint.py)."""
        if self.state.judged is None:
            old = self.state.checkpoint
            self.state.judged, self.state.checkpoint = checkpoint.judged(self.order, old)
            if self.state.checkpoint is not old:
                self._index.keep(self.state)  # the next cold read resumes from this one
        return self.state.judged

    def known_good(self) -> KnownGood:
        """knowngood.known_good's order (gate passes, then accepted INCONCLUSIVEs, newest first
        within each), read off the judgements; each whole operation loaded only when reached."""
        return KnownGood(self)

    def records(self) -> list[Record]:
        """Every valid record in order (the whole journal parsed; damaged lines: warnings())."""
        parsed, _ = recordfile.parse(bytes(self.buf))
        out: list[Record] = []
        for n, r in parsed:
            with contextlib.suppress(RecordError):
                out.append(parse_record(r, f"{self._index.path}:{n}"))
        return out

    def _rebuild(self, exc: Stale) -> None:
        """The index did not hold (forged, or an edit its proof cannot see): scan anew."""
        self._index.drop(str(exc))
        self.state, self.buf = self._index.current()
        self.order = placed(self.state)

    def merges(self) -> list[Record]:
        try:
            return [record_at(self.buf, o, None) for o in self.state.merges]
        except Stale as exc:
            self._rebuild(exc)
            return [record_at(self.buf, o, None) for o in self.state.merges]

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
            raw = self.buf[start:end].strip()
            end = start
            if not raw:
                continue
            try:
                out.append(parse_record(json.loads(raw), f"{self._index.path}@{start}"))
            except (ValueError, UnicodeDecodeError, RecordError):
                continue  # torn or damaged (the index noted it)
        return out[::-1]


class _Lazy(Sequence[T]):
    """A lazy Sequence equal to any Sequence of the same items (never hashed)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class Operations(_Lazy[Operation]):
    """The journal's operations, each folded from its own records when first touched."""

    def __init__(self, view: View) -> None:
        self._view = view
        self._order = view.order

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, i: int) -> Operation: ...
    @overload
    def __getitem__(self, i: slice) -> list[Operation]: ...

    def __getitem__(self, i: int | slice) -> Operation | list[Operation]:
        if isinstance(i, slice):
            return [self._view.load(e) for e in self._order[i]]
        return self._view.load(self._order[i])

    def __iter__(self) -> Iterator[Operation]:
        return (self._view.load(e) for e in self._order)

    def __reversed__(self) -> Iterator[Operation]:
        return (self._view.load(e) for e in reversed(self._order))

    def newest_first(
        self,
        *,
        kinds: Collection[Kind] | None = None,
        status: Status | None = None,
        profile: JSONObject | None = None,
    ) -> Iterator[Operation]:
        """The operations newest first, skipping unread those that cannot match: another kind
        or status (the index's), or a deploy/rollback/experiment whose indexed profile has other
        `profile` values. The rest are loaded whole (the caller still checks them): a walk back
        that finds nothing reads no record of the operations it skipped."""
        wanted = {k.value for k in kinds} if kinds is not None else None
        for p in self._order.positions(
            kinds=wanted,
            status=status.value if status else None,
            profile=profile,
            newest_first=True,
        ):
            yield self._view.load(self._order[p])

    def positions(
        self,
        *,
        kinds: Collection[Kind] | None = None,
        terminal: bool | None = None,
        newest_first: bool = False,
    ) -> Iterator[int]:
        """The positions (indexes into this Sequence) of the operations of those kinds / that
        have (not) ended, read off the index: no operation is read to find them."""
        return self._order.positions(
            kinds={k.value for k in kinds} if kinds is not None else None,
            terminal=terminal,
            newest_first=newest_first,
        )

    def find(self, op: str) -> Operation | None:
        """The operation with exactly this id (read alone), else None."""
        e = self._order.table.get(op)
        return None if e is None else self._view.load(e)

    def entries(self) -> Placed:
        """The index entries in the same order (status, kind, running without a fold)."""
        return self._order


class KnownGood(_Lazy[Operation]):
    """The known-good deployments in rollback's order (View.known_good): positions found as
    they are asked for (the newest pass is found first), each operation loaded when read."""

    def __init__(self, view: View) -> None:
        self._view = view
        self._judged = view.judged()
        self._found: list[Entry] = []
        self._walk = self._positions()

    def _positions(self) -> Iterator[Entry]:
        """Passes newest first (found as they are asked for), then accepted INCONCLUSIVEs."""
        table = self._view.order.table
        for rank in (knowngood.PASSED, knowngood.ACCEPTED):
            for op in checkpoint.ranked(self._judged, rank):
                e = table.get(op)
                if e is not None:
                    yield e

    def _upto(self, n: int | None) -> None:
        while n is None or len(self._found) < n:
            e = next(self._walk, None)
            if e is None:
                return
            self._found.append(e)

    def __len__(self) -> int:
        self._upto(None)
        return len(self._found)

    @overload
    def __getitem__(self, i: int) -> Operation: ...
    @overload
    def __getitem__(self, i: slice) -> list[Operation]: ...

    def __getitem__(self, i: int | slice) -> Operation | list[Operation]:
        if isinstance(i, slice):
            self._upto(None if i.stop is None or i.stop < 0 or (i.start or 0) < 0 else i.stop)
            return [self._view.load(e) for e in self._found[i]]
        self._upto(None if i < 0 else i + 1)
        return self._view.load(self._found[i])

    def __bool__(self) -> bool:
        self._upto(1)
        return bool(self._found)

    def __iter__(self) -> Iterator[Operation]:
        n = 0
        while True:
            self._upto(n + 1)
            if n >= len(self._found):
                return
            yield self._view.load(self._found[n])
            n += 1
