"""The journal store: one append-only JSONL record per target.

Where the record lives is the store's backend: `FileBackend` (a file under the state directory,
the default) or the target's own record through its agent (`orchestrate/targetjournal.py`, what
the CLI composes), with the state directory's file as its offline cache. Either way the file
rules are `dsv4ops/journalfile.py`: every call's records are written with one `write` on an
O_APPEND descriptor and fsynced before the call returns, so the step it announces runs only once
the record is on disk. A crash mid-write can leave at most a torn last line: readers skip it
(and say so), and the next append first terminates it so later records stay intact.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from dsv4ops import journalfile
from dsv4ops.clock import Clock, SystemClock, utc_now_iso
from dsv4ops.constants import state_dir
from dsv4ops.errors import JournalError
from dsv4ops.journal import knowngood
from dsv4ops.journal.memo import Folded
from dsv4ops.journal.records import (
    RECORD_VERSION,
    Kind,
    Operation,
    Status,
    check_transition,
    scrub,
)
from dsv4ops.whoami import operator_identity

UNKNOWN = "?"  # `running` value when an operation could not tell what is left running
# Set by `dsv4ops runbook run` for the commands it runs: their operations name the run.
RUNBOOK_RUN_ENV = "DSV4OPS_RUNBOOK_RUN"
# Operation ids start with the kind's letter for the operations that run the unit; the others
# spell their kind, so a runbook run ("runbook-…") never reads like a rollback ("r-…").
_OP_PREFIX = {Kind.DEPLOY: "d", Kind.ROLLBACK: "r", Kind.STOP: "s", Kind.KERNELS: "k"}
_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def journal_path(target: str, directory: Path | None = None) -> Path:
    """Path of the target's journal file; raise JournalError for an unsafe target name."""
    if not _TARGET_NAME.match(target):
        raise JournalError(f"target name {target!r} cannot name a journal file")
    return Path(directory or state_dir() / "journal") / f"{target}.jsonl"


class JournalBackend(Protocol):
    """Where a journal's bytes live. `path` is the local file (the record, or its cache)."""

    path: Path

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        """Append whole lines durably (raise JournalError or TargetError); `lock_op` is the
        operation whose deploy lock the writer holds (None outside an operation)."""

    def read(self, *, lock_op: str | None = None) -> bytes:
        """The record's bytes, current (raise JournalError or TargetError); `lock_op` as for
        append (a backend may trust what it holds while that operation holds the lock)."""

    def describe(self) -> dict[str, Any]:
        """Where the last read came from: {"source": "file"|"target"|"cache", ...}."""


class FileBackend:
    """The record is a local file (a journal of its own, or a test's)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        try:
            journalfile.append_bytes(str(self.path), data)
        except OSError as exc:
            raise JournalError(f"cannot write journal {self.path}: {exc.strerror}") from exc

    def read(self, *, lock_op: str | None = None) -> bytes:
        try:
            return journalfile.read_bytes(str(self.path))
        except OSError as exc:
            raise JournalError(f"cannot read journal {self.path}: {exc.strerror}") from exc

    def describe(self) -> dict[str, Any]:
        return {"source": "file", "path": str(self.path)}


class Journal:
    """Append-only journal of one target. Opens nothing until a method is called."""

    def __init__(
        self,
        target: str,
        *,
        directory: Path | None = None,
        clock: Clock | None = None,
        backend: JournalBackend | None = None,
    ):
        self.target = target
        self.backend = backend or FileBackend(journal_path(target, directory))
        self.path = self.backend.path
        self._clock = clock or SystemClock()
        self._lock_op: str | None = None
        self.skipped_lines: list[int] = []
        self._folded = Folded(str(self.path))

    @contextlib.contextmanager
    def under_lock(self, op_id: str) -> Iterator[None]:
        """Appends meanwhile are made as operation `op_id`, holder of the deploy lock: the
        target's record refuses them once another operation holds it."""
        before, self._lock_op = self._lock_op, op_id
        try:
            yield
        finally:
            self._lock_op = before

    def source(self) -> dict[str, Any]:
        """Where the last read came from (the backend's describe(): file, target or cache)."""
        return self.backend.describe()

    # -- writing -------------------------------------------------------------------------------

    def begin(
        self,
        kind: Kind,
        *,
        profile: dict[str, Any] | None = None,
        components: list[dict[str, Any]] | None = None,
        reason: str | None = None,
        undo: dict[str, Any] | None = None,
        user: str | None = None,
        op_id: str | None = None,
        kernel: dict[str, Any] | None = None,
        scope: dict[str, Any] | None = None,
    ) -> str:
        """Record a new PENDING operation (with its undo information); return its id.
        `scope` describes a partial restart (see Operation.scope)."""
        op_id = op_id or self.new_op_id(kind)
        record: dict[str, Any] = {
            "type": "begin",
            "op": op_id,
            "kind": kind.value,
            "user": user or operator_identity(),
            "profile": profile,
            "components": components or [],
            "reason": reason,
            "undo": undo,
        }
        if kernel is not None:
            record["kernel"] = kernel
        if scope is not None:
            record["scope"] = scope
        run = os.environ.get(RUNBOOK_RUN_ENV)
        if run and kind.changes_target:
            record["runbook_run"] = run  # this command is a step of that runbook run
        # One append (one round trip to a remote record) for both records.
        self._append(record, {"type": "status", "op": op_id, "status": Status.PENDING.value})
        return op_id

    def new_op_id(self, kind: Kind) -> str:
        """A fresh, sortable operation id such as 'd-20261129T150102-3fa9'."""
        stamp = self._clock.now().strftime("%Y%m%dT%H%M%S")
        return f"{_OP_PREFIX.get(kind, kind.value)}-{stamp}-{secrets.token_hex(2)}"

    def transition(
        self,
        op_id: str,
        status: Status,
        *,
        message: str | None = None,
        running: str | None = None,
        processes: dict[str, Any] | None = None,
        kernel: dict[str, Any] | None = None,
        known_good: bool = False,
    ) -> None:
        """Persist a status change. `running` names the op whose deployment runs now ('' none);
        `kernel` adds to a KERNELS operation's details what only the outcome knows (version);
        `known_good` records that a SUCCEEDED deploy/rollback proved its whole unit through the
        router (Operation.proven; whether it is known-good is dsv4ops.journal.knowngood's)."""
        current = self.get(op_id)
        check_transition(current.status, status)
        if known_good and status is not Status.SUCCEEDED:
            raise JournalError(f"only a SUCCEEDED operation can be known-good, not {status.value}")
        record: dict[str, Any] = {"type": "status", "op": op_id, "status": status.value}
        if message is not None:
            record["message"] = message
        if running is not None:
            record["running"] = running
        if processes:
            record["processes"] = processes
        if kernel:
            record["kernel"] = kernel
        if known_good:
            record["known_good"] = True
        self._append(record)

    def step(
        self,
        op_id: str,
        name: str,
        phase: str,
        *,
        duration_s: float | None = None,
        detail: str | None = None,
    ) -> None:
        """Record that a step starts ('start') or ended ('done' / 'failed')."""
        record: dict[str, Any] = {"type": "step", "op": op_id, "name": name, "phase": phase}
        if duration_s is not None:
            record["duration_s"] = round(duration_s, 3)
        if detail:
            record["detail"] = detail
        self._append(record)

    def _append(self, *records: dict[str, Any]) -> None:
        stamp = {"v": RECORD_VERSION, "ts": utc_now_iso(self._clock)}
        data = b"".join(journalfile.encode({**stamp, **scrub(r)}) for r in records)
        self.backend.append(data, lock_op=self._lock_op)

    # -- reading -------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """Every valid record in order; torn lines are skipped and listed in skipped_lines.
        (Parsed once per byte: journal/memo.py folds only what this object has not seen.)"""
        records, self.skipped_lines = self._folded.records(self.backend.read(lock_op=self._lock_op))
        return list(records)

    def operations(self) -> list[Operation]:
        data = self.backend.read(lock_op=self._lock_op)
        self.skipped_lines = list(self._folded.records(data)[1])
        return self._folded.operations(data)

    def merges(self) -> list[dict[str, Any]]:
        """The merge records: each operator-side journal merged into this record, once."""
        return [r for r in self.records() if r["type"] == "merge"]

    def get(self, op_id: str) -> Operation:
        """The operation with this id (or unique id prefix); raise JournalError if none."""
        matches = [o for o in self.operations() if o.op == op_id or o.op.startswith(op_id)]
        exact = [o for o in matches if o.op == op_id]
        if exact:
            return exact[0]
        if len(matches) != 1:
            what = "no" if not matches else "more than one"
            raise JournalError(f"{what} journal entry matches {op_id!r} in {self.path}")
        return matches[0]

    def in_flight(self) -> list[Operation]:
        """Operations that never reached a terminal status (a CLI that died mid-way). A runbook
        run is not one of them: it changes nothing itself and stays open until it is resumed."""
        return [o for o in self.operations() if not o.status.terminal and o.kind.changes_target]

    def known_good(self) -> list[Operation]:
        """Known-good deployments in the order rollback offers them (the one rule:
        dsv4ops.journal.knowngood): gate passes newest first, then accepted INCONCLUSIVEs."""
        return knowngood.known_good(self.operations())

    def judged(self) -> dict[str, knowngood.Judgement]:
        """op id -> whether that deploy/rollback is known-good and why (the same rule)."""
        return knowngood.judge(self.operations())

    def last_known_good(self, *, exclude: str | None = None) -> Operation | None:
        """The newest known-good deployment (other than `exclude`), by the same rule."""
        return next((o for o in self.known_good() if o.op != exclude), None)

    def deployed(self) -> Operation | None:
        """The operation whose deployment runs now per the journal (None: nothing or unknown)."""
        ops = {o.op: o for o in self.operations()}
        for o in reversed(list(ops.values())):
            if not o.status.terminal or o.running is None:
                continue
            return ops.get(o.running) if o.running not in ("", UNKNOWN) else None
        return None

    def deployed_is_unknown(self) -> Operation | None:
        """The operation that left the target in an unknown state, if that is the latest word."""
        for o in reversed(self.operations()):
            if not o.kind.changes_target:
                continue
            if o.status.terminal and o.running is not None:
                return o if o.running == UNKNOWN else None
            if not o.status.terminal:
                return o
        return None
