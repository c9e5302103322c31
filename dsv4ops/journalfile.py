"""The journal's file rules, stdlib only: written by the operator's store (`journal/store.py`)
and by the target agent (`remote/agent/journal.py`, shipped in the agent zip), so they exist once.

A journal file holds one JSON record per line. An append is one `write` on an O_APPEND
descriptor, fsynced before it returns. A crash mid-write can leave at most a torn last line:
readers skip it, and the next append first terminates it so later records stay intact.

A record is identified by its operation id and its sequence number among that operation's
records in the file (`record_keys`): the merge of an operator-side journal into the target's
appends exactly the records whose identity the target's file does not hold yet.

The file is opened with O_NOFOLLOW and checked before a byte is read or written (`_open`): a
regular file owned by this user and writable by nobody else. A journal path replaced by a
symlink (to a victim file) or by someone else's file is refused with UnsafeJournalFile, so an
append can never land in another file and a read never passes another file off as the record.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from typing import Any

Record = dict[str, Any]


class UnsafeJournalFile(OSError):
    """The journal path is a symlink, not a regular file, not this user's, or writable by others."""


def _open(path: str, flags: int) -> int:
    """An fd on `path` opened without following a symlink, checked to be a regular file owned by
    this user and not writable by group or others. Raises UnsafeJournalFile (or OSError)."""
    try:
        # O_NONBLOCK: a FIFO put in its place must not hang the open (no effect on a regular file).
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeJournalFile(
                exc.errno, "is a symbolic link; the journal is never written through one", path
            ) from None
        raise
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "is not a regular file"
    elif st.st_uid != os.geteuid():
        why = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        why = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    if why is not None:
        os.close(fd)
        raise UnsafeJournalFile(errno.EPERM, f"{why}; refusing to use it as a journal", path)
    return fd


def append_bytes(path: str, data: bytes) -> None:
    """Append `data` (whole lines) in one write and fsync; terminate a torn last line first.
    Creates the file (0600) and its directory. Raises OSError (UnsafeJournalFile: see _open)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = _open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        if _ends_torn(fd):
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def encode(record: Record) -> bytes:
    """One record as its journal line."""
    return (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()


def parse(data: bytes) -> tuple[list[tuple[int, Record]], list[int]]:
    """([(line number, record)], torn line numbers): lines that do not parse as a JSON object
    are torn writes from a crash; everything around them is still good."""
    out: list[tuple[int, Record]] = []
    torn: list[int] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            parsed = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            torn.append(lineno)
            continue
        out.append((lineno, parsed))
    return out, torn


def record_keys(records: list[Record]) -> list[tuple[str, int]]:
    """(op id, sequence among that op's records) of each record, in order."""
    seen: dict[str, int] = {}
    keys = []
    for r in records:
        op = str(r.get("op") if isinstance(r, dict) else None)
        keys.append((op, seen.get(op, 0)))
        seen[op] = seen.get(op, 0) + 1
    return keys


def missing_records(present: list[Record], incoming: list[Record]) -> list[Record]:
    """The `incoming` records whose identity (record_keys) `present` does not hold, in order."""
    have = set(record_keys(present))
    return [r for r, k in zip(incoming, record_keys(incoming), strict=True) if k not in have]


def read_bytes(path: str) -> bytes:
    """The file's bytes (b"" when absent). Raises OSError on any other failure (UnsafeJournalFile
    for a symlink or a file that is not safely this user's: see _open)."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tail_after(data: bytes, offset: int, prefix_sha256: str | None) -> tuple[bytes, bool]:
    """(bytes a reader holding `offset` bytes lacks, whether it must start over): the reader's
    copy is a prefix of `data` only when its hash matches; otherwise it gets everything."""
    if 0 <= offset <= len(data) and prefix_sha256 == sha256(data[:offset]):
        return data[offset:], False
    return data, True


@contextlib.contextmanager
def exclusive(path: str) -> Iterator[None]:
    """Hold an exclusive flock on `path`.lock: check-then-append (the merge) stays atomic."""
    import fcntl

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = _open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
