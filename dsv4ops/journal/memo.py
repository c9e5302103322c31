"""A journal's records and operations, kept folded as the file grows (issue 21: 10^6 records).

A journal only grows (O_APPEND, journalfile.py), and one command reads it many times: a deploy
looks its operation up before every transition, status asks for what is deployed, in flight,
known-good. Parsing, validating and folding the whole file on each of those reads made every
append O(N). `Folded.update(data)` does that work only for the bytes it has not seen: when the
new bytes start with the ones already folded (a memcmp, no parse), only the tail is parsed,
validated and folded into copies of the operations it touches; anything else (a rewritten or
replaced record: the target's record reset) starts over. A last line without its newline (a torn
write, or one being written) is never folded in: it is parsed again on the next read.
"""

from __future__ import annotations

from typing import Any

from dsv4ops import journalfile
from dsv4ops.journal.records import Operation, fold_into, place_merged, validate


class Folded:
    """The folded state of a journal's whole lines read so far."""

    def __init__(self, where: str) -> None:
        self.where = where  # the journal's path, for errors (file:line)
        self._reset()

    def _reset(self) -> None:
        self._data = b""  # the whole lines folded so far
        self._lines = 0  # how many lines those are
        self._records: list[dict[str, Any]] = []
        self._skipped: list[int] = []
        self._ops: dict[str, Operation] = {}
        self._merges = False  # any merge record: placing merged operations needs the records

    def update(self, data: bytes) -> None:
        """Bring the state to `data`. Raises JournalError for a malformed record."""
        if not data.startswith(self._data):
            self._reset()  # rewritten or replaced: start over
        end = data.rfind(b"\n") + 1  # whole lines only; a partial last line waits
        if end <= len(self._data):
            return
        chunk = data[len(self._data) : end]
        parsed, torn = journalfile.parse(chunk)
        new = [validate(r, f"{self.where}:{self._lines + n}") for n, r in parsed]
        self._ops = fold_into(self._ops, new)
        self._records = self._records + new  # a new list: one handed out earlier stays as it was
        self._skipped = self._skipped + [self._lines + n for n in torn]
        self._merges = self._merges or any(r["type"] == "merge" for r in new)
        self._lines += chunk.count(b"\n")
        self._data = data[:end]

    def records(self, data: bytes) -> tuple[list[dict[str, Any]], list[int]]:
        """(every valid record, torn line numbers) of `data`, its partial last line included."""
        self.update(data)
        rest = data[len(self._data) :]
        if not rest.strip():
            return self._records, self._skipped
        parsed, torn = journalfile.parse(rest)
        extra = [validate(r, f"{self.where}:{self._lines + n}") for n, r in parsed]
        return self._records + extra, self._skipped + [self._lines + n for n in torn]

    def operations(self, data: bytes) -> list[Operation]:
        records, _ = self.records(data)
        if len(records) != len(self._records):  # a complete record not yet newline-terminated
            ops = list(fold_into(self._ops, records[len(self._records) :]).values())
        else:
            ops = list(self._ops.values())
        merges = self._merges or any(r["type"] == "merge" for r in records[len(self._records) :])
        return place_merged(ops, records) if merges else ops
