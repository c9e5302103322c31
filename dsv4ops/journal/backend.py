"""Where a journal's bytes live (journal/store.py's backend): the `JournalBackend` protocol and
`FileBackend`, a plain file under the state directory (the target's record through its agent is
journal/target.py). The file rules are dsv4ops/journal/recordfile.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict

from dsv4ops.constants import state_dir
from dsv4ops.errors import JournalError
from dsv4ops.journal import recordfile

_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def journal_path(target: str, directory: Path | None = None) -> Path:
    """Path of the target's journal file; raise JournalError for an unsafe target name."""
    if not _TARGET_NAME.match(target):
        raise JournalError(f"target name {target!r} cannot name a journal file")
    return Path(directory or state_dir() / "journal") / f"{target}.jsonl"


class Divergence(TypedDict):
    """The record lost history (journal/divergence.py): what the copy this machine kept holds
    that the record lacks, which copy is newer, and the command that merges it back."""

    copy: str
    copy_records: int
    copy_last_ts: str | None
    target_records: int
    target_last_ts: str | None
    missing_on_target: int
    newer: str  # "target" | "cache"
    merge_command: str


class JournalSource(TypedDict):
    """Where the last read came from (`describe()`, `journal --json`'s and status's "record"):
    a local file (`path`), or the target's record (`record`) through its `cache`, read from
    the cache alone while the target is unreachable (`error`)."""

    source: str  # "file" | "target" | "cache"
    path: NotRequired[str]
    record: NotRequired[str]
    cache: NotRequired[str]
    synced_at: NotRequired[str | None]
    age_s: NotRequired[float | None]
    error: NotRequired[str]
    cache_error: NotRequired[str]
    diverged: NotRequired[Divergence]


class MergeDone(TypedDict):
    """What `journal --merge` did: records appended, of which operations, and where the kept
    copy went (absent: there was none)."""

    merged: int
    ops: list[str]
    copy: NotRequired[str]


class JournalBackend(Protocol):
    """Where a journal's bytes live. `path` is the local file (the record, or its cache)."""

    path: Path

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        """Append whole lines durably (raise JournalError or TargetError); `lock_op` is the
        operation whose deploy lock the writer holds (None outside an operation)."""

    def refresh(self, *, lock_op: str | None = None) -> None:
        """Bring `path` current (raise JournalError or TargetError); `lock_op` as for append (a
        backend may trust what it holds while that operation holds the lock)."""

    def describe(self) -> JournalSource:
        """Where the last read came from: {"source": "file"|"target"|"cache", ...}."""


class FileBackend:
    """The record is a local file (a journal of its own, or a test's)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        try:
            recordfile.append_bytes(str(self.path), data)
        except OSError as exc:
            raise JournalError(f"cannot write journal {self.path}: {exc.strerror}") from exc

    def refresh(self, *, lock_op: str | None = None) -> None:
        return None  # the file is the record

    def describe(self) -> JournalSource:
        return {"source": "file", "path": str(self.path)}
