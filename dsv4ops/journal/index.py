"""The journal's per-operation index, `<journal>.idx` (issue 21: every command stays fast at 10^6).

What it holds, for the journal's first `size` bytes (whole lines): each operation's id, kind,
begin time, status, what it left running, the byte offsets of its records and, for deploys,
rollbacks and experiments, what the known-good rule reads of them (`knowngood.essentials`: the
fold state the rule needs, so judging never re-reads a record); the merge records' offsets and
what placing merged operations reads (`records.place_by`); the torn lines. From that the store
answers status, the last N operations, in-flight, deployed and known-good by reading only the
records of the operations it returns (`journal/view.py`).

The file (format 4): line 1 a JSON header (`format`, `version`, `size`, `window`, `body`: the
sha256 of every other header field and the rest, the code tables, counts, merges, torn and
damaged lines, ids begun twice: journal/damage.py), then the entries as columns
(journal/columns.py: a cold read decodes only the entries it shows, journal/entries.py), then the
known-good judgement checkpoint (journal/checkpoint.py). An index of another format or version
is rebuilt, never read.

Trust: an index is used only when its format and version are this code's, its `size` is within
the journal and `window` equals `journalfile.window_sha256(journal, size)` (the size and a hash
of the 64 KiB before it). A truncated, rewritten, replaced or foreign journal fails that proof and
the index is rebuilt by one full scan (and written again); so is one whose indexed offset does not
hold that operation's record when read back (an edit the proof cannot see, a header forged with
its sha256: `Stale`). A rebuild for that, or for an index failing its own checks (not merely
another journal's), is said (`notify`), never an error. Bytes
appended after `size` are folded in, re-reading only the operations they touch. The file is
written atomically and read without following a symlink (`journalfile`); an index that cannot
be written costs speed on the next cold read, never correctness.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json
import mmap
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dsv4ops import journalfile
from dsv4ops.errors import JournalError
from dsv4ops.journal import checkpoint, columns, damage, knowngood
from dsv4ops.journal.entries import JUDGED, KINDS, STATUSES, Entry, Table
from dsv4ops.journal.order import Placed
from dsv4ops.journal.records import Operation, fold_into, validate
from dsv4ops.jsontypes import JSONObject

FORMAT = "dsv4ops-journal-index"
# 2: the judgement checkpoint; 3: the entries as columns (journal/columns.py); 4: the sha256
# covers the header too (a forged `merges` made every read fail, issue 39), damaged lines and
# operation ids begun twice are indexed
VERSION = 4
SAVE_EVERY = 1 << 18  # bytes folded in since the index file was last written: write it again

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
            [[s.name, s.phase, s.detail] for s in e.steps],
        ]
    return Entry(
        o.op, o.kind.value, o.ts, o.status.value, o.running, view, offsets, count=len(offsets)
    )


@dataclass
class State:
    """The index of a journal's first `size` bytes (see the module docstring)."""

    size: int = 0
    window: str = field(default_factory=lambda: journalfile.window_of(b""))
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
    saved_size: int = -1  # `size` when the index file was last written or read
    # The known-good judgement of this state (judged once per state: a command asks many times).
    judged: Mapping[str, knowngood.Judgement] | None = field(default=None, repr=False)
    # knowngood's fold state after a prefix of the operations (journal/checkpoint.py: it proves
    # itself against the entries before it is used, so appends never make it wrong).
    checkpoint: checkpoint.Checkpoint | None = field(default=None, repr=False)
    order: Placed | None = field(default=None, repr=False)  # placed(): made once per state

    def overlay(self) -> State:
        """A copy to fold a partial last line into (never kept, never written)."""
        out = copy.copy(self)
        out.judged, out.order = None, None
        out.entries, out.merges, out.skipped = (
            self.entries.copy(),
            list(self.merges),
            list(self.skipped),
        )
        out.merged, out.after_first_merge = set(self.merged), set(self.after_first_merge)
        out.damaged = list(self.damaged)
        out.duplicates = {k: list(v) for k, v in self.duplicates.items()}
        out.orphans = {k: list(v) for k, v in self.orphans.items()}
        return out


def record_at(buf: Buffer, offset: int, op: str | None) -> JSONObject:
    """The record whose line starts at `offset`; Stale unless it is a valid record (of `op`)."""
    end = buf.find(b"\n", offset)
    raw = buf[offset : end if end >= 0 else len(buf)]
    try:
        rec = validate(json.loads(raw), f"@{offset}")
    except (ValueError, UnicodeDecodeError, JournalError):
        raise Stale(f"no record at byte {offset}") from None
    if op is not None and rec.get("op") != op:
        raise Stale(f"the record at byte {offset} is not one of {op}'s")
    return rec


def fold_chunk(state: State, buf: Buffer, start: int, end: int, fd: int, where: str) -> None:
    """Fold the lines of buf[start:end] into `state` (in place): the operations they touch are
    re-folded from all their records. Raises JournalError for a malformed record (file:line)."""
    touched: dict[str, list[tuple[int, JSONObject]]] = {}
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
        if rec["type"] == "merge":
            state.merges.append(at)
            state.merged.update(rec.get("ops") or [])
            continue
        begun = rec["op"] in touched or state.entries.row(rec["op"]) is not None
        if not damage.its_own(rec, f"{where}:{n}", begun, state.duplicates, state.orphans):
            continue
        if rec["type"] == "begin" and state.merges:
            state.after_first_merge.add(rec["op"])
        touched.setdefault(rec["op"], []).append((at, rec))
    for op, new in touched.items():
        old = state.entries.get(op)
        prior = [record_at(buf, o, op) for o in old.offsets] if old else []
        folded = fold_into({}, prior + [r for _, r in new])[op]
        state.entries[op] = _entry(folded, (old.offsets if old else []) + [o for o, _ in new])
    state.lines += len(pieces)
    state.size = end
    state.window = journalfile.window_sha256(fd, end)


# -- the file ----------------------------------------------------------------------------------


def encode(state: State) -> bytes:
    sections = [
        *columns.encode(state.entries),
        checkpoint.encode(state.checkpoint) if state.checkpoint is not None else b"",
    ]
    body = b"".join(sections)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "size": state.size,
        "window": state.window,
        "sections": [len(x) for x in sections],
        "kinds": KINDS,
        "statuses": STATUSES,
        "lines": state.lines,
        "records": state.records,
        "merges": state.merges,
        "merged": sorted(state.merged),
        "after_first_merge": sorted(state.after_first_merge),
        "skipped": state.skipped,
        "damaged": state.damaged,
        "duplicates": state.duplicates,
        "orphans": state.orphans,
    }
    header["body"] = _digest(header, body)  # a garbled column or header field is never read
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + body


def _digest(header: JSONObject, body: bytes | memoryview) -> str:
    """sha256 of every header field but itself, then the body."""
    h = hashlib.sha256(
        json.dumps({k: v for k, v in header.items() if k != "body"}, sort_keys=True).encode()
    )
    h.update(body)
    return h.hexdigest()


def sections(data: bytes) -> tuple[JSONObject, list[memoryview]] | None:
    """(the header, the body's sections) of an index file of this format and version; None for
    another one; ValueError for one whose header or body does not match its sha256 (and
    ValueError, TypeError, KeyError for garbage)."""
    cut = data.index(b"\n")
    h = json.loads(data[:cut])
    if h.get("format") != FORMAT or h.get("version") != VERSION:
        return None
    body = memoryview(data)[cut + 1 :]
    lengths = [int(n) for n in h["sections"]]
    if min(lengths, default=0) < 0 or sum(lengths) != len(body):
        raise ValueError("its sections do not add up to its body")
    if h["body"] != _digest(h, body):
        raise ValueError("its header or body does not match its sha256")
    ends = list(itertools.accumulate(lengths, initial=0))
    return h, [body[a:b] for a, b in itertools.pairwise(ends)]


def decode(
    data: bytes, fd: int, journal_size: int, problems: list[str] | None = None
) -> State | None:
    """The State `data` holds if it is an index of this journal's first bytes; else None (and,
    when it is this format but inconsistent, not merely another journal's, why in `problems`)."""
    try:
        found = sections(data)
        if found is None:
            return None
        h, parts = found
        size = h["size"]
        if not isinstance(size, int) or not 0 <= size <= journal_size:
            return None
        if h["window"] != journalfile.window_sha256(fd, size):
            return None  # truncated, rewritten or another journal: never trusted
        if len(parts) != columns.SECTIONS + 1:
            return None
        table = columns.decode(parts[: columns.SECTIONS], h)
        if table is None:
            raise ValueError("its columns disagree")
        state = State(
            size=size,
            window=h["window"],
            lines=int(h["lines"]),
            records=int(h["records"]),
            entries=table,
            merges=[int(o) for o in h["merges"]],
            merged=set(h["merged"]),
            after_first_merge=set(h["after_first_merge"]),
            skipped=[int(n) for n in h["skipped"]],
            damaged=[[int(n), str(why)] for n, why in h["damaged"]],
            duplicates=_lines_of(h["duplicates"]),
            orphans=_lines_of(h["orphans"]),
            saved_size=size,
        )
        ck_raw = bytes(parts[columns.SECTIONS])
        state.checkpoint = checkpoint.decode(ck_raw) if ck_raw else None
        return state
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        if problems is not None:
            problems.append(str(exc) if isinstance(exc, ValueError) else "it does not decode")
        return None


def _lines_of(value: dict[str, list[int]]) -> dict[str, list[int]]:
    return {str(k): [int(n) for n in v] for k, v in value.items()}


class JournalIndex:
    """The index of one journal file, kept current in memory and on disk (`<path>.idx`)."""

    def __init__(self, path: str, notify: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.file = f"{path}.idx"
        self._state: State | None = None
        self._notify = notify or (lambda _line: None)

    def current(self) -> tuple[State, Buffer]:
        """(the index of the whole journal, its bytes: an mmap, or b"" when empty/absent).
        Raises JournalError for a malformed record, OSError (UnsafeJournalFile) for the file."""
        fd = journalfile.open_read(self.path)
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
        """Forget the index (memory and file): the next current() scans the whole journal.
        `why`: the index did not match the journal (said, since someone may have forged it)."""
        if why is not None:
            self._rebuilt(why)
        self._state = None
        with contextlib.suppress(OSError):
            journalfile.write_atomic(self.file, b"")

    def _fresh(self, fd: int, buf: Buffer, end: int) -> State:
        s = self._state
        if s is not None and not (
            s.size <= end and s.window == journalfile.window_sha256(fd, s.size)
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
        if s.size - s.saved_size >= SAVE_EVERY or (s.saved_size < 0 and s.size):
            self._save(s)
        return s

    def keep(self, s: State) -> None:
        """Write the index again for a new checkpoint of the state current() returned (never
        an overlay of a partial last line: that is not what the file indexes)."""
        if s is self._state:
            self._save(s)

    def _load(self, fd: int, end: int) -> State | None:
        try:
            data = journalfile.read_bytes(self.file)
        except OSError:
            return None  # unreadable, a symlink, someone else's: rebuilt, never followed
        problems: list[str] = []
        state = decode(data, fd, end, problems) if data else None
        for why in problems:
            self._rebuilt(why)
        return state

    def _rebuilt(self, why: str) -> None:
        self._notify(
            f"warning: the journal's index {self.file} did not match the journal ({why}); "
            "rebuilt from the journal itself (the append-only record decides)"
        )

    def _save(self, s: State) -> None:
        with contextlib.suppress(OSError):
            journalfile.write_atomic(self.file, encode(s))
            s.saved_size = s.size


def placed(state: State) -> Placed:
    """The entries in the journal's order (merged operations placed by records.place_by)."""
    if state.order is None:
        state.order = Placed(state.entries, state.merged, state.after_first_merge)
    return state.order
