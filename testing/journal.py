"""Test helpers and doubles for `dsv4ops.journal` (one module per package area).

- FullDiskBackend: a journal file whose appends fail as on a full disk while `full` is set.
"""

from __future__ import annotations

from pathlib import Path

from dsv4ops.errors import JournalError
from dsv4ops.journal.store import FileBackend


class FullDiskBackend(FileBackend):
    """The plain journal file; while `full`, an append fails as a full disk makes it fail, and
    `keep` (the fallback the store hands unwritten records to) takes them into `kept`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.full = False
        self.kept: list[bytes] = []

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        if self.full:
            raise JournalError(f"cannot write journal {self.path}: No space left on device")
        super().append(data, lock_op=lock_op)

    def keep(self, data: bytes) -> Path:
        self.kept.append(data)
        return self.path.with_suffix(".kept")
