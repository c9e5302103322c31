"""Test helpers and doubles for `dsv4ops.journal` (one module per package area).

- FullDiskBackend: a journal file whose appends fail as on a full disk while `full` is set.
- gate_step: a deploy's canary gate journaled as the engine journals it (with its GateResult).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dsv4ops.errors import JournalError
from dsv4ops.journal.gates import GateSource, GateVerdict, canary_gate
from dsv4ops.journal.records import Kind
from dsv4ops.journal.store import FileBackend, Journal


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


def gate_step(
    j: Journal, op: str, detail: str = "PASS", *, name: str = "canary: smoke", took: float = 1.0
) -> None:
    """Operation `op`'s canary gate step's end record as the engine writes it: its detail's words
    ("PASS ...", "INCONCLUSIVE, accepted as asked: ...", "verdict FAIL: ...") and the GateResult
    they say (journal/gates.py), for the commands `op` began with."""
    o = j.get(op)
    verdict = (
        GateVerdict.FAIL
        if detail.startswith("verdict FAIL")
        else GateVerdict.INCONCLUSIVE
        if detail.startswith("INCONCLUSIVE")
        else GateVerdict.PASS
    )
    source = GateSource.ROLLBACK if o.kind is Kind.ROLLBACK else GateSource.DEPLOY
    h = str((o.profile or {}).get("commands_hash") or "") or None
    g = canary_gate(verdict, [f"smoke: {verdict.value}"], True, source, op, h)
    phase = "failed" if verdict is GateVerdict.FAIL else "done"
    j.step(op, name, phase, detail=detail, duration_s=took, gate=replace(g, duration_s=took))
