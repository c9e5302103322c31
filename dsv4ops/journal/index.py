"""The journal's per-operation index, kept in a SQLite cache next to the record (cache.py):
folds appended bytes in, rebuilds by one full scan whatever does not prove itself (`Stale`,
`Untrusted`, a cut record; said through `notify`, never an error). What is trusted when:
docs/deploy.md, "The journal: record, index, judge"."""

from __future__ import annotations

import contextlib
import copy
import json
import mmap
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dsv4ops.journal import checkpoint, damage, knowngood, recordfile
from dsv4ops.journal.cache import Cache, Untrusted
from dsv4ops.journal.entries import JUDGED, KINDS, STATUSES, Entry, Table
from dsv4ops.journal.order import Placed
from dsv4ops.journal.records import Operation, fold_into
from dsv4ops.journal.schema import BeginRecord, MergeRecord, Record, RecordError, parse_record
from dsv4ops.jsontypes import JSONObject, JSONValue

Buffer = bytes | mmap.mmap

__all__ = ["Entry", "JournalIndex", "Stale", "State", "placed", "record_at"]


class Stale(Exception):
    """An indexed offset does not hold the record the index says: rebuild from a full scan."""


def _entry(o: Operation, offsets: list[int]) -> Entry:
    view = None
    if o.kind.value in JUDGED:
        e = knowngood.essentials(o)
        view = [
            e.profile,
            bool(e.components),
            e.scope,
            e.reason,
            e.marked_known_good,
            [g.to_record() for g in e.gates],
        ]
    return Entry(
        o.op, o.kind.value, o.ts, o.status.value, o.running, view, offsets, count=len(offsets)
    )


@dataclass
class State:
    """The index of a journal's first `size` bytes (see the module docstring)."""

    size: int = 0
    window: str = field(default_factory=lambda: recordfile.window_of(b""))
    lines: int = 0
    records: int = 0
    entries: Table = field(default_factory=Table)  # begin order (journal/entries.py)
    merges: list[int] = field(default_factory=list)  # offsets of the merge records
    merged: set[str] = field(default_factory=set)  # ops a merge brought in
    after_first_merge: set[str] = field(default_factory=set)  # ops begun after the first merge
    skipped: list[int] = field(default_factory=list)  # torn line numbers
    # Lines that are no readable record of an operation: [line, "file:line: why"]; what the
    # rest of the journal says is still read (a mutating command is refused: store.py).
    damaged: list[damage.Damaged] = field(default_factory=list)
    # op id begun again under an id already begun -> the lines from that second begin on: they
    # are another operation's records and never read as the first one's (issue 39: they hid a
    # known-good).
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    orphans: dict[str, list[int]] = field(default_factory=dict)  # op -> lines: no begin read
    saved_size: int = -1  # `size` the cache holds (-1: the cache holds none of this state)
    dirty: set[str] = field(default_factory=set)  # ops folded since the cache was written
    saved_ck: object = None  # the checkpoint the cache holds (another: written again)
    # The known-good judgement of this state (judged once per state: a command asks many times).
    judged: Mapping[str, knowngood.Judgement] | None = field(default=None, repr=False)
    # knowngood's fold state after a prefix of the operations (journal/checkpoint.py: it proves
    # itself against the entries before it is used, so appends never make it wrong).
    checkpoint: checkpoint.Checkpoint | None = field(default=None, repr=False)
    order: Placed | None = field(default=None, repr=False)  # placed(): made once per state

    def overlay(self) -> State:
        """A copy to fold a partial last line into (never kept, never written)."""
        out = copy.copy(self)
        for k, read in _KEPT.items():
            setattr(out, k, read(getattr(self, k)))  # a copy of each list, set and dict
        out.judged, out.order, out.entries, out.dirty = None, None, self.entries.copy(), set()
        return out

    def meta(self) -> JSONObject:
        """What the cache keeps of this state besides its rows (journal/cache.py's `meta`)."""
        kept = {k: getattr(self, k) for k in _KEPT}
        kept = {k: sorted(v) if isinstance(v, set) else v for k, v in kept.items()}
        return {**kept, "kinds": KINDS, "statuses": STATUSES, "ops": len(self.entries)}


# The State fields the cache's `meta` keeps, each read back through its type (a forged value of
# another type fails here: the cache is rebuilt).
_KEPT: dict[str, Callable[[JSONValue], object]] = {
    "size": int,
    "window": str,
    "lines": int,
    "records": int,
    "merges": lambda v: [int(o) for o in v],
    "merged": lambda v: {str(o) for o in v},
    "after_first_merge": lambda v: {str(o) for o in v},
    "skipped": lambda v: [int(n) for n in v],
    "damaged": lambda v: [[int(n), str(why)] for n, why in v],
    "duplicates": lambda v: {str(k): [int(n) for n in x] for k, x in v.items()},
    "orphans": lambda v: {str(k): [int(n) for n in x] for k, x in v.items()},
}


def _state(h: JSONObject, table: Table) -> State:
    """The State of a cache's `meta` (raises ValueError, TypeError, KeyError for garbage)."""
    state = State(entries=table)
    for k, read in _KEPT.items():
        setattr(state, k, read(h[k]))
    state.saved_size = state.size
    return state


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


def fold_chunk(state: State, buf: Buffer, start: int, end: int, fd: int, where: str) -> None:
    """Fold the lines of buf[start:end] into `state` (in place): the operations they touch are
    re-folded from all their records. Raises JournalError for a malformed record (file:line)."""
    touched: dict[str, list[tuple[int, Record]]] = {}
    state.judged, state.order = None, None
    offset = start
    pieces = buf[start:end].split(b"\n")
    if end and buf[end - 1 : end] == b"\n":
        pieces.pop()  # the empty piece after the last newline
    for n, raw in enumerate(pieces, start=state.lines + 1):
        at, offset = offset, offset + len(raw) + 1
        rec = damage.read_line(raw, f"{where}:{n}", state.skipped, state.damaged)
        if rec is None:
            continue
        state.records += 1
        if isinstance(rec, MergeRecord):
            state.merges.append(at)
            state.merged.update(rec.ops)
            continue
        begun = rec.op in touched or state.entries.row(rec.op) is not None
        if not damage.its_own(rec, f"{where}:{n}", begun, state.duplicates, state.orphans):
            continue
        if isinstance(rec, BeginRecord) and state.merges:
            state.after_first_merge.add(rec.op)
        touched.setdefault(rec.op, []).append((at, rec))
    for op, new in touched.items():
        old = state.entries.get(op)
        prior = [record_at(buf, o, op) for o in old.offsets] if old else []
        folded = fold_into(prior + [r for _, r in new])[op]
        state.entries[op] = _entry(folded, (old.offsets if old else []) + [o for o, _ in new])
    state.dirty.update(touched)
    state.lines += len(pieces)
    state.size = end
    state.window = recordfile.window_sha256(fd, end)


class JournalIndex:
    """The index of one journal file, kept current in memory and in its cache (journal/cache.py)."""

    def __init__(self, path: str, notify: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.cache = Cache(path)
        self.file = self.cache.path
        self._state: State | None = None
        self._notify = notify or (lambda _line: None)

    def current(self) -> tuple[State, Buffer]:
        """(the index of the whole journal, its bytes: an mmap, or b"" when empty/absent).
        Raises JournalError for a malformed record, OSError (UnsafeJournalFile) for the file."""
        fd = recordfile.open_read(self.path)
        if fd is None:
            self._state = State()
            return State(), b""
        try:
            size = os.fstat(fd).st_size
            buf: Buffer = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
            end = buf.rfind(b"\n") + 1  # whole lines only; a partial last line is read apart
            state = self._fresh(fd, buf, end)
            if end < size:
                state = state.overlay()
                fold_chunk(state, buf, end, size, fd, self.path)
            return state, buf
        finally:
            os.close(fd)

    @property
    def last(self) -> State | None:
        """The index as the last current() left it (None: not read yet)."""
        return self._state

    def drop(self, why: str | None = None) -> None:
        """Forget the index (memory and cache): the next current() scans the whole journal.
        `why`: the index did not match the journal (said, since someone may have forged it)."""
        if why is not None:
            self._rebuilt(why)
        self._state = None
        with contextlib.suppress(OSError):
            self.cache.remove()

    def _fresh(self, fd: int, buf: Buffer, end: int) -> State:
        s = self._state
        if s is not None and not (
            s.size <= end and s.window == recordfile.window_sha256(fd, s.size)
        ):
            s = None  # what this process indexed is no longer the journal's beginning
        if s is None:
            s = self._load(fd, end)
        if s is None:
            s = State()
        try:
            if s.size < end:
                fold_chunk(s, buf, s.size, end, fd, self.path)
        except Stale as exc:
            if s.size == 0 and not s.entries:
                raise
            self._rebuilt(str(exc))
            s = State()  # the index did not hold: the full scan decides (and names the line)
            fold_chunk(s, buf, 0, end, fd, self.path)
        self._state = s
        if s.size != s.saved_size:
            self._save(s)
        return s

    def keep(self, s: State) -> None:
        """Write the cache again for a new checkpoint of the state current() returned (never
        an overlay of a partial last line: that is not what the cache indexes)."""
        if s is self._state:
            self._save(s)

    def _load(self, fd: int, end: int) -> State | None:
        try:
            found = self.cache.load()
            if found is None:
                return None  # empty, or of another version: rebuilt silently
            h, ck, cols = found
            size = int(h["size"])
            if size > end:
                self._rebuilt(
                    f"it indexes {size} bytes, the journal holds {end}: the journal was cut "
                    "or replaced"
                )
                return None
            if h["window"] != recordfile.window_sha256(fd, size):
                return None  # rewritten, or another journal: never trusted
            state = _state(h, Table(cols))
        except (Untrusted, sqlite3.Error, ValueError, TypeError, KeyError) as exc:
            why = f"SQLite: {exc}" if isinstance(exc, sqlite3.Error) else str(exc)
            self._rebuilt(why or type(exc).__name__)
            with contextlib.suppress(OSError):
                self.cache.remove()  # a file SQLite cannot read is made anew
            return None
        except OSError:
            return None  # unreadable: rebuilt in memory
        state.checkpoint = state.saved_ck = checkpoint.decode(ck.encode()) if ck else None
        return state

    def _rebuilt(self, why: str) -> None:
        self._notify(
            f"warning: the journal's index {self.file} did not match the journal ({why}); "
            "rebuilt from the journal itself (the append-only record decides)"
        )

    def _save(self, s: State) -> None:
        """Write what changed since the cache was written (all of it for a new cache)."""
        whole = s.saved_size < 0
        t = s.entries
        if whole:
            rows = list(enumerate(t.values()))
        else:
            at = sorted(r for r in map(t.row, s.dirty) if r is not None)
            rows = [(r, t.at(r)) for r in at]
        kept = None  # the checkpoint the cache holds stays (megabytes at 10^6 records)
        if whole or s.checkpoint is not s.saved_ck:
            kept = checkpoint.encode(s.checkpoint).decode() if s.checkpoint is not None else ""
        try:
            if self.cache.save(s.meta(), kept, rows, whole=whole, based_on=s.saved_size):
                s.saved_size, s.dirty, s.saved_ck = s.size, set(), s.checkpoint
        except (sqlite3.Error, OSError):
            with contextlib.suppress(OSError):
                self.cache.remove()  # never read again as it is: the next read rebuilds it


def placed(state: State) -> Placed:
    """The entries in the journal's order (merged operations placed by records.place_by)."""
    if state.order is None:
        state.order = Placed(state.entries, state.merged, state.after_first_merge)
    return state.order
