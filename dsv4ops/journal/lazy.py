"""A row (`Entry`) and the lazy Sequences and Mapping the store hands out over one read (view.py).
docs/deploy.md, "The journal: record, index, judge"."""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass
from typing import Protocol, TypeVar, overload

from dsv4ops.journal.knowngood import INHERITS
from dsv4ops.journal.records import ACCEPTED, PASSED, Judgement, Kind, Operation, Status
from dsv4ops.journal.rows import JUDGED
from dsv4ops.jsontypes import JSONObject

T = TypeVar("T")
_KINDS = {k.value for k in Kind}
_STATUSES = {s.value: s for s in Status}
GOOD = "kind IN ('deploy', 'rollback')"  # the rows the known-good rule judges


@dataclass(frozen=True)
class Entry:
    """One operation's row (rows.facts): what walks, the judge and `status` read unfolded."""

    op: str
    kind: str
    status: str
    live: int
    ts: str
    running: str | None
    count: int
    blob: bytes
    place: int
    name: str | None
    hash: str | None
    pre: int | None
    own: int | None
    why: str | None
    block: str | None
    arm: str | None

    @property
    def terminal(self) -> bool:
        return not self.live

    @property
    def offsets(self) -> list[int]:
        return array("q", self.blob).tolist()[: self.count]


def fits(r: tuple[object, ...]) -> bool:
    """Whether a row holds what rows.fold writes (a forged or garbled one: rebuilt)."""
    op, kind, status, live, _ts, running, count, blob = r[:8]
    pre, own, why = r[11:14]
    return (
        isinstance(op, str)
        and kind in _KINDS
        and status in _STATUSES
        and live == int(not _STATUSES[str(status)].terminal)
        and isinstance(running, str | None)
        and isinstance(count, int)
        and isinstance(blob, bytes)
        and len(blob) == 8 * count
        and isinstance(r[8], int)
        and (
            kind not in ("deploy", "rollback")
            or (pre in (0, 1) and own in (INHERITS, 0, 1, 2) and isinstance(why, str))
        )
    )


def facts_of(e: Entry) -> tuple[object, ...]:
    """What rows.facts gives of the operation `e` is the row of (its kind .. its arm)."""
    every = astuple(e)
    return every[1:6] + every[9:]


class Reader(Protocol):
    """What these read of one read of the journal (view.py's View)."""

    n: int
    generation: int  # a new one when the index was rebuilt under this read

    def at(self, pos: int) -> Entry: ...
    def entry(self, op: str) -> Entry | None: ...
    def walk(
        self, where: str = "1", *args: object, newest_first: bool = False
    ) -> Iterator[Entry]: ...
    def load(self, entry: Entry, *, retry: bool = True) -> Operation: ...
    def judge(self, e: Entry) -> Judgement | None: ...
    def count(self, where: str) -> int: ...


def _where(
    kinds: Collection[str] | None,
    statuses: Collection[str] | None,
    profile: JSONObject | None = None,
) -> tuple[str, list[object]]:
    """SQL for the rows of those kinds and statuses whose profile (of the kinds that keep a
    view: their profile's name and commands hash) has the `profile` values."""
    parts, args = ["1"], list[object]()
    for col, wanted in (("kind", kinds), ("status", statuses)):
        if wanted is not None:
            parts.append(f"{col} IN ({','.join('?' * len(wanted))})")
            args += sorted(wanted)
    same = []
    for k, v in (profile or {}).items():
        column = {"name": "name", "commands_hash": "hash"}.get(k)
        if column is None and v is not None:
            same.append("0")  # no row holds another key
        elif column is not None and isinstance(v, str):
            same.append(f"{column} = ?")
            args.append(v)
        elif column is not None and v is None:
            same.append(f"{column} IS NULL")
    if same:
        judged = all(k in {j.value for j in JUDGED} for k in kinds or ())
        viewless = (
            ""
            if kinds is not None and judged
            else "kind NOT IN ('deploy', 'rollback', 'experiment') OR "
        )
        parts.append(f"({viewless}({' AND '.join(same)}))")
    return " AND ".join(parts), args


class _Lazy(Sequence[T]):
    """A lazy Sequence equal to any Sequence of the same items (never hashed): item `n` is
    `_item(n)`, and `_known(stop)` how many are known once the first `stop` (None: all) are."""

    def _item(self, n: int) -> T:
        raise NotImplementedError

    def _known(self, stop: int | None) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self._known(None)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            whole = i.stop is None or i.stop < 0 or (i.start or 0) < 0
            return [self._item(n) for n in range(self._known(None if whole else i.stop))[i]]
        return self._item(range(self._known(None if i < 0 else i + 1))[i])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class Operations(_Lazy[Operation]):
    """The journal's operations, each folded from its own records when first touched."""

    def __init__(self, view: Reader) -> None:
        self._view = view

    def _known(self, stop: int | None) -> int:
        return self._view.n

    def _item(self, n: int) -> Operation:
        return self._view.load(self._view.at(n))

    def __iter__(self) -> Iterator[Operation]:
        return (self._view.load(e) for e in self._view.walk())

    def __reversed__(self) -> Iterator[Operation]:
        return (self._view.load(e) for e in self._view.walk(newest_first=True))

    def newest_first(
        self,
        *,
        kinds: Collection[Kind] | None = None,
        status: Status | None = None,
        profile: JSONObject | None = None,
    ) -> Iterator[Operation]:
        """The operations newest first, skipping unread those that cannot match: another kind
        or status (the index's), or a deploy/rollback/experiment whose indexed profile has other
        `profile` values. The rest are loaded whole (the caller still checks them)."""
        where, args = _where(
            None if kinds is None else {k.value for k in kinds},
            None if status is None else {status.value},
            profile,
        )
        return (self._view.load(e) for e in self._view.walk(where, *args, newest_first=True))

    def positions(
        self,
        *,
        kinds: Collection[Kind] | None = None,
        terminal: bool | None = None,
        newest_first: bool = False,
    ) -> Iterator[int]:
        """The positions (indexes into this Sequence) of the operations of those kinds / that
        have (not) ended, read off the index: no operation is read to find them."""
        where, args = _where(None if kinds is None else {k.value for k in kinds}, None)
        if terminal is not None:
            where += f" AND live = {int(not terminal)}"
        return (e.place for e in self._view.walk(where, *args, newest_first=newest_first))

    def find(self, op: str) -> Operation | None:
        """The operation with exactly this id (read alone), else None."""
        e = self._view.entry(op)
        return None if e is None else self._view.load(e)

    def prefixed(self, prefix: str) -> list[Operation]:
        """The operations whose id starts with `prefix`, in the journal's order."""
        top = prefix + chr(0x10FFFF)  # (SQLite compares text by its UTF-8 bytes)
        found = self._view.walk("op >= ? AND op < ?", prefix, top)
        return [self._view.load(e) for e in found if e.op.startswith(prefix)]


class Judgements(Mapping[str, Judgement]):
    """op id -> the known-good judgement of every deploy and rollback, judged when asked."""

    def __init__(self, view: Reader) -> None:
        self._view = view

    def __getitem__(self, op: str) -> Judgement:
        e = self._view.entry(op)
        j = None if e is None else self._view.judge(e)
        if j is None:
            raise KeyError(op)
        return j

    def __iter__(self) -> Iterator[str]:
        return (e.op for e in self._view.walk(GOOD))

    def __len__(self) -> int:
        return self._view.count(GOOD)


class KnownGood(_Lazy[Operation]):
    """The known-good deployments in rollback's order (passes, then accepted
    INCONCLUSIVEs, newest first in each), found as asked for, each loaded when read."""

    def __init__(self, view: Reader) -> None:
        self._view = view
        self._found: list[Entry] = []
        self._walk = self._positions()

    def _positions(self) -> Iterator[Entry]:
        for rank in (PASSED, ACCEPTED):
            for e in self._view.walk("own != 0", newest_first=True):
                j = self._view.judge(e)
                if j is not None and j.rank == rank:
                    yield e

    def _known(self, stop: int | None) -> int:
        while stop is None or len(self._found) < stop:
            e = next(self._walk, None)
            if e is None:
                break
            self._found.append(e)
        return len(self._found)

    def _item(self, n: int) -> Operation:
        """The `n`th found, loaded; found again when reading it rebuilt the index (a row the
        records did not bear out: the list is the rule's over the rebuilt rows)."""
        seen = self._view.generation
        op = self._view.load(self._found[n])
        if self._view.generation == seen:
            return op
        self._found, self._walk = [], self._positions()
        self._known(n + 1)
        return self._view.load(self._found[n])

    def __bool__(self) -> bool:
        return self._known(1) > 0

    def __iter__(self) -> Iterator[Operation]:
        n = 0
        while self._known(n + 1) > n:
            yield self._item(n)
            n += 1
