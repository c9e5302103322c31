"""The journal's file rules, stdlib only: the target agent ships this file in its zip and uses
it as the operator's store does. docs/deploy.md, "The journal" ("The file itself")."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator

from dsv4ops.jsontypes import JSONObject

Record = JSONObject


class UnsafeJournalFile(OSError):
    """The journal path is a symlink, not a regular file, not this user's, or writable by others."""


WINDOW = 1 << 16  # bytes of a copy's end its prefix proof hashes (window_sha256)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _base(path: str) -> str:
    """Where the walk down to the journal's directory starts (trusted as the user chose it): two
    levels above it (the project root; the agent's home). docs/deploy.md, "The file itself"."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))


def _open_dir(path: str, *, create: bool) -> int:
    """An fd on `path`'s directory, reached from _base one component at a time without following
    a symlink, each directory this user's (created 0700 when `create`). Raises UnsafeJournalFile."""
    base = _base(path)
    rel = os.path.relpath(os.path.dirname(os.path.abspath(path)), base)
    if create:
        os.makedirs(base, exist_ok=True)
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in [] if rel == os.curdir else rel.split(os.sep):
        base = os.path.join(base, part)
        fd = _step(fd, part, create, base)  # closes the parent's fd, whatever happens
    return fd


def _step(parent: int, part: str, create: bool, where: str) -> int:
    """The fd of directory `part` under `parent` (closed here), refused if it is a symlink."""
    try:
        try:
            fd = os.open(part, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=parent)
            fd = os.open(part, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            link = stat.S_ISLNK(os.stat(part, dir_fd=parent, follow_symlinks=False).st_mode)
            why = "is a symbolic link" if link else "is not a directory"
            raise UnsafeJournalFile(
                exc.errno, f"{why}; the journal is never reached through one", where
            ) from None
        raise
    finally:
        os.close(parent)
    owner = os.fstat(fd).st_uid
    if owner not in (os.geteuid(), 0):  # root's directories are trusted, as ssh's StrictModes
        os.close(fd)
        raise UnsafeJournalFile(
            errno.EPERM, f"is a directory owned by uid {owner}, not by this user", where
        )
    return fd


def _open(path: str, flags: int) -> int:
    """An fd on `path` opened without following a symlink (in any component below _base), checked
    to be a regular file owned by this user and not writable by group or others. Raises
    UnsafeJournalFile (or OSError)."""
    dfd = _open_dir(path, create=bool(flags & os.O_CREAT))
    try:
        # O_NONBLOCK: a FIFO put in its place must not hang the open (no effect on a regular file).
        fd = os.open(
            os.path.basename(path),
            flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeJournalFile(
                exc.errno, "is a symbolic link; the journal is never written through one", path
            ) from None
        raise
    finally:
        os.close(dfd)
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


def open_read(path: str) -> int | None:
    """A checked read-only fd on `path` (None when absent); see _open."""
    try:
        return _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` with `data`: a 0600 temp file in the same (safely walked) directory, fsync,
    rename. A symlink planted at either name is replaced, never written through."""
    dfd = _open_dir(path, create=True)
    name = os.path.basename(path)
    # One temp name per writer: two threads of one process (a deploy and a refused second one,
    # a runbook's step and its journal) replacing the same file must not share it, or one
    # thread's rename takes the other's temp file away (FileNotFoundError mid-deploy).
    tmp = f".{name}.tmp.{os.getpid()}.{threading.get_ident()}"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)  # a leftover of a killed run (or a planted link)
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(dfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_bytes(path: str, data: bytes, *, mend: bool = True) -> None:
    """Append `data` (whole lines) in one write and fsync; terminate a torn last line first
    (`mend`; a copy of another file appends its bytes as they are). Creates the file (0600) and
    its directory. Raises OSError (UnsafeJournalFile: see _open)."""
    fd = _open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        if mend and _ends_torn(fd):
            data = b"\n" + data
        _write_all(fd, data)
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


# The record types the agent reads; journal/schema.py declares its types by these names.
BEGIN, MERGE = "begin", "merge"


def record_type(r: Record) -> str | None:
    """A record's declared type (schema.RECORD_TYPES), None when it names none."""
    t = r.get("type") if isinstance(r, dict) else None
    return t if isinstance(t, str) else None


def began(records: list[Record]) -> list[str]:
    """The operation ids the `begin` records among `records` open, in order."""
    return [str(r.get("op")) for r in records if record_type(r) == BEGIN]


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


def window_sha256(fd: int, end: int) -> str:
    """The proof that a copy of `end` bytes is what this file holds: the hash of `end` and of the
    last WINDOW bytes before it (one pread, whatever the file's size)."""
    start = max(0, end - WINDOW)
    chunk = os.pread(fd, end - start, start)
    return hashlib.sha256(b"%d:" % end + chunk).hexdigest()


def proof(path: str) -> tuple[int, str]:
    """(size, window_sha256) of the file at `path` ((0, window_of(b"")) when absent)."""
    fd = open_read(path)
    if fd is None:
        return 0, window_of(b"")
    try:
        size = os.fstat(fd).st_size
        return size, window_sha256(fd, size)
    finally:
        os.close(fd)


def window_of(data: bytes) -> str:
    """window_sha256 of bytes held in memory (a reader's own copy)."""
    return hashlib.sha256(b"%d:" % len(data) + data[-WINDOW:]).hexdigest()


def read_since(path: str, offset: object, window: object) -> tuple[bytes, bool, int, str]:
    """(bytes a reader holding `offset` bytes lacks, whether it must start over, the file's size,
    its window_sha256): the reader's copy is a prefix only when its window proof matches;
    otherwise (shorter, diverged, no proof) it gets everything. Reads only what it sends."""
    fd = open_read(path)
    if fd is None:
        return b"", not (offset == 0 or offset is None), 0, window_of(b"")
    try:
        size = os.fstat(fd).st_size
        prefix = (
            isinstance(offset, int)
            and 0 <= offset <= size
            and isinstance(window, str)
            and window == window_sha256(fd, offset)
        )
        start = offset if prefix and isinstance(offset, int) else 0
        with open(fd, "rb", closefd=False) as f:  # read(n) reads until n bytes or the end
            f.seek(start)
            tail = f.read(size - start)
        return tail, not prefix, size, window_sha256(fd, size)
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive(path: str) -> Iterator[None]:
    """Hold an exclusive flock on `path`.lock: check-then-append (the merge) stays atomic."""
    import fcntl

    fd = _open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
