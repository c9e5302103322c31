"""The journal's index, `<journal>.sqlite` (tables: rows.py), brought up to date by each read;
whatever does not prove itself is rebuilt by a full scan and said, never an error.
docs/deploy.md, "The journal: record, index, judge"."""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import sqlite3
import stat
from collections.abc import Callable

from dsv4ops.journal import recordfile, rows
from dsv4ops.journal.rows import Buffer, Stale, State
from dsv4ops.jsontypes import JSONValue

SUFFIX = ".sqlite"
SCHEMA = 3  # PRAGMA user_version: another version is rebuilt silently (3: SQL-first rows)
_SIDE = ("", "-wal", "-shm")  # the files SQLite keeps for one database in WAL mode
_OLD = (".idx",)  # index files of earlier versions: deleted on first read


class Untrusted(Exception):
    """The index fails its own checks (why): rebuilt from the record, and said."""


class _Grown(Exception):
    """Another process indexed what was appended after this one mapped the record."""


def _ints(v: JSONValue) -> list[int]:
    return [int(n) for n in v]


def _lines(v: JSONValue) -> dict[str, list[int]]:
    return {str(k): _ints(x) for k, x in v.items()}


_READ: dict[str, Callable[[JSONValue], object]] = {  # State's fields, each read by its type
    "size": int,
    "window": str,
    "lines": int,
    "records": int,
    "ops": int,
    "merges": _ints,
    "merged": lambda v: [str(o) for o in v],
    "merged_ts": str,
    "skipped": _ints,
    "damaged": lambda v: [[int(n), str(why)] for n, why in v],
    "duplicates": _lines,
    "orphans": _lines,
}


def sha(text: str) -> str:
    """The sha256 `meta` keeps of its state (a check of the file, no MAC)."""
    return hashlib.sha256(text.encode()).hexdigest()


def _state(text: str) -> State:
    try:
        raw = json.loads(text)
        return State(**{k: read(raw[k]) for k, read in _READ.items()})  # type: ignore[arg-type]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Untrusted(f"its state is not one this code wrote ({exc})") from None


class Index:
    """The index of one journal file (`current()`: brought up to date with the record)."""

    def __init__(self, path: str, notify: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.file = f"{path}{SUFFIX}"
        self._db: sqlite3.Connection | None = None
        self._notify = notify or (lambda _line: None)
        self.last: State | None = None  # what the last current() read (whole lines)
        self._counted = False  # the rows were counted against the state (once per process)

    def _safe(self) -> None:
        """Remove a planted symlink, a non-regular or someone else's file at the index's
        names (never opened: SQLite would follow it), and the old index files."""
        for name in [self.file + s for s in _SIDE] + [self.path + s for s in _OLD]:
            try:
                st = os.lstat(name)
            except FileNotFoundError:
                continue
            mine = stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
            if name.endswith(_OLD) or not mine or st.st_mode & 0o077:
                os.unlink(name)

    def db(self) -> sqlite3.Connection:
        """The open database (created 0600 when absent). Raises sqlite3.Error, OSError."""
        if self._db is None:
            self._safe()
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            db = sqlite3.connect(self.file, isolation_level=None, check_same_thread=False)
            self._db = db
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # a cache: a power cut loses a fold
            db.execute("PRAGMA busy_timeout=5000")
        return self._db

    def remove(self) -> None:
        """Delete the index's files (a damaged one: SQLite may not even open it)."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        self._counted = False
        for s in _SIDE:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.file + s)

    def drop(self, why: str) -> None:
        """The index did not hold (a row read back that is not what its records say): said and
        removed; the next current() rebuilds it from the record."""
        self._rebuilt(why)
        with contextlib.suppress(OSError):
            self.remove()

    def _rebuilt(self, why: str) -> None:
        self._notify(
            f"warning: the journal's index {self.file} did not match the journal ({why}); "
            "rebuilt from the journal itself (the append-only record decides)"
        )

    def current(self) -> tuple[sqlite3.Connection, State, Buffer]:
        """(the database, its state, the record's bytes) with every whole line of the record
        indexed; a partial last line is read into a copy (rows.partial), never kept. Raises
        OSError (UnsafeJournalFile) for the file."""
        fd = recordfile.open_read(self.path)
        if fd is None:
            self.last = State()
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            rows.create(db)
            return db, State(), b""
        try:
            for _ in range(3):
                size = os.fstat(fd).st_size
                buf: Buffer = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
                end = buf.rfind(b"\n") + 1  # whole lines only
                try:
                    db, st = self._indexed(fd, buf, end)
                    break
                except _Grown:
                    continue  # mapped again, as long as it is now
            else:
                db, st = rows.scan(fd, buf, end, self.path)
            self.last = st
            if end < size:
                st = st.copy()
                try:
                    db = rows.partial(db, st, buf, (end, size), fd, self.path)
                except Stale as exc:  # a row the index holds is not its records': rebuilt
                    self.drop(str(exc))
                    db, st = rows.scan(fd, buf, size, self.path)
            return db, st, buf
        finally:
            os.close(fd)

    def _indexed(self, fd: int, buf: Buffer, end: int) -> tuple[sqlite3.Connection, State]:
        """The database with the record's first `end` bytes indexed: folded on, else rebuilt
        (said, unless it is merely of another version or journal); in memory when its file
        cannot be written or another process holds it."""
        for _ in range(2):
            try:
                return self._fold(fd, buf, end)
            except (Stale, Untrusted) as exc:
                self._rebuilt(str(exc))
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc):
                    break  # another process folds it (> busy_timeout): read it in memory
                self._rebuilt(f"SQLite: {exc}")
            except sqlite3.DatabaseError as exc:
                self._rebuilt(f"SQLite: {exc}")
            except OSError:
                break  # unwritable: indexed in memory
            with contextlib.suppress(OSError):
                self.remove()
        return rows.scan(fd, buf, end, self.path)

    def _fold(self, fd: int, buf: Buffer, end: int) -> tuple[sqlite3.Connection, State]:
        db = self.db()
        st = self._load(db, fd, end)
        if st is not None and st.size == end:
            return db, st
        db.execute("BEGIN IMMEDIATE")
        try:
            st = self._load(db, fd, end)  # another process may have folded meanwhile
            made = st is None
            if st is None:
                rows.create(db)
                db.execute(f"PRAGMA user_version = {SCHEMA}")
                st = State()
            if st.size < end or made:
                rows.fold(db, st, buf, (st.size, end), fd, self.path)
                text = json.dumps({k: getattr(st, k) for k in _READ}, separators=(",", ":"))
                db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("state", text), ("digest", sha(text))],
                )
            db.execute("COMMIT")
            if made:  # a build: its pages into the file now, not a WAL as large as the index
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        return db, st

    def _load(self, db: sqlite3.Connection, fd: int, end: int) -> State | None:
        """The state the database holds; None when empty, of another version or of another
        journal (rebuilt silently). Raises Untrusted, _Grown, sqlite3.Error."""
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
            return None
        try:
            meta = dict(db.execute("SELECT k, v FROM meta"))
        except sqlite3.OperationalError:
            return None  # no tables yet
        if "state" not in meta:
            return None
        if meta.get("digest") != sha(meta["state"]):
            raise Untrusted("its state does not match its sha256")
        st = _state(meta["state"])
        grown = st.size > end and os.fstat(fd).st_size >= st.size
        if grown and st.window == recordfile.window_sha256(fd, st.size):
            raise _Grown
        if st.size > end:
            raise Untrusted(
                f"it indexes {st.size} bytes, the journal holds {end}: the journal was cut or "
                "replaced"
            )
        if st.window != recordfile.window_sha256(fd, st.size):
            return None  # rewritten, or another journal: never trusted
        # The rows and places, once per process (count(*) reads an index: ~2 ms at 10^6
        # records; later loads by this connection see its own folds).
        if not self._counted:
            got = db.execute("SELECT count(*), max(row), max(place) FROM ops").fetchone()
            if got != ((st.ops, st.ops - 1, st.ops - 1) if st.ops else (0, None, None)):
                raise Untrusted(f"it holds {got[0]} operation row(s), its state says {st.ops}")
            self._counted = True
        return st
