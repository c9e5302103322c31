"""The journal store: one append-only JSONL record per target, through a backend, read through
its SQLite index. docs/deploy.md, "The journal"."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Unpack

from dsv4ops.clock import Clock, SystemClock, utc_now_iso
from dsv4ops.errors import DsOpsError, JournalError
from dsv4ops.journal import opids, recordfile
from dsv4ops.journal.backend import FileBackend, JournalBackend, JournalSource, journal_path
from dsv4ops.journal.commands import command
from dsv4ops.journal.gates import GATES_RECORDED, GateResult, GateSource
from dsv4ops.journal.index import Index
from dsv4ops.journal.lazy import Judgements, KnownGood, Operations
from dsv4ops.journal.records import Judgement, Kind, Operation, Status, check_transition, scrub
from dsv4ops.journal.schema import (
    BeginFields,
    BeginRecord,
    Record,
    StatusRecord,
    StepRecord,
    TransitionFields,
    parse_record,
    to_json,
)
from dsv4ops.journal.view import View
from dsv4ops.jsontypes import JSONObject
from dsv4ops.whoami import operator_identity

__all__ = ["UNKNOWN", "FileBackend", "Journal", "JournalBackend", "journal_path"]

UNKNOWN = "?"  # `running` value when an operation could not tell what is left running
# Set by `dsv4ops runbook run` for the commands it runs: their operations name the run.
RUNBOOK_RUN_ENV = "DSV4OPS_RUNBOOK_RUN"
# Operation ids start with the kind's letter for the operations that run the unit; the others
# spell their kind, so a runbook run ("runbook-…") never reads like a rollback ("r-…").
_OP_PREFIX = {Kind.DEPLOY: "d", Kind.ROLLBACK: "r", Kind.STOP: "s", Kind.KERNELS: "k"}


def gate_source(kind: Kind, recover: bool) -> GateSource:
    """Whose gate a deploy's or rollback's canary step is (journal/gates.py)."""
    if recover:
        return GateSource.RECOVER
    if os.environ.get(RUNBOOK_RUN_ENV):
        return GateSource.RUNBOOK  # a step of `dsv4ops runbook run`
    return GateSource.ROLLBACK if kind is Kind.ROLLBACK else GateSource.DEPLOY


class Journal:
    """Append-only journal of one target. Opens nothing until a method is called."""

    def __init__(
        self,
        target: str,
        *,
        directory: Path | None = None,
        clock: Clock | None = None,
        backend: JournalBackend | None = None,
        notify: Callable[[str], None] | None = None,
    ):
        """`notify`: where a warning line goes (a rebuilt index, a damaged line: once each)."""
        self.target = target
        self.backend = backend or FileBackend(journal_path(target, directory))
        self.path = self.backend.path
        self._clock = clock or SystemClock()
        self._lock_op: str | None = None
        self.skipped_lines: list[int] = []
        self._notify = notify or (lambda _line: None)
        self._told: set[str] = set()
        self._index = Index(str(self.path), self._notify)
        self._loaded: dict[tuple[str, int], Operation] = {}  # operations folded by this object
        # Encoded records `step(..., defer=True)` held for the next append (see there), and
        # records whose write failed while `keep_unwritten` (below): retried by the next write.
        self._deferred: list[bytes] = []
        # Set once an operation began (operation.py): from then on a record that cannot be
        # written (a full disk) is what happened, so it is kept in memory, never dropped.
        self.keep_unwritten = False

    @contextlib.contextmanager
    def under_lock(self, op_id: str) -> Iterator[None]:
        """Appends meanwhile are made as operation `op_id`, holder of the deploy lock: the
        target's record refuses them once another operation holds it."""
        before, self._lock_op = self._lock_op, op_id
        try:
            yield
        except BaseException:
            with contextlib.suppress(DsOpsError):  # the error that ended the block comes first
                self.flush()
            raise
        else:
            self.flush()  # a deferred record goes under the lock it was made under
        finally:
            self._lock_op = before

    def source(self) -> JournalSource:
        """Where the last read came from (the backend's describe(): file, target or cache)."""
        return self.backend.describe()

    # -- writing -------------------------------------------------------------------------------

    def begin(
        self,
        kind: Kind,
        *,
        op_id: str | None = None,
        **fields: Unpack[BeginFields],
    ) -> str:
        """Record a new PENDING operation (with its undo information); return its id.
        `scope` describes a partial restart (see Operation.scope)."""
        if kind is not Kind.STOP:  # the brake always works: a stop only takes away what runs
            self._refuse_if_damaged()
        op_id = op_id or self.new_op_id(kind)
        run = os.environ.get(RUNBOOK_RUN_ENV)
        begun = BeginRecord(
            op_id,
            self._now(),
            fields.get("user") or operator_identity(),
            kind,
            profile=fields.get("profile"),
            components=fields.get("components") or [],
            reason=fields.get("reason"),
            undo=fields.get("undo"),
            kernel=fields.get("kernel"),
            scope=fields.get("scope"),
            runbook_run=run if run and kind.changes_target else None,  # a step of that run
            gates=GATES_RECORDED,  # its gates are its GateResults (journal/gates.py)
        )
        # One append (one round trip to a remote record) for both records.
        self._append(begun, StatusRecord(op_id, begun.ts, Status.PENDING))
        return op_id

    def new_op_id(self, kind: Kind) -> str:
        """A fresh, sortable operation id such as 'd-20261129T150102-3fa9' (journal/opids.py)."""
        stamp = self._clock.now().strftime("%Y%m%dT%H%M%S")
        return opids.draw(_OP_PREFIX.get(kind, kind.value), stamp)

    def transition(
        self,
        op_id: str,
        status: Status,
        **fields: Unpack[TransitionFields],
    ) -> None:
        """Persist a status change. `running` names the op whose deployment runs now ('' none);
        `kernel` adds to a KERNELS operation's details what only the outcome knows (version);
        `known_good` records that a SUCCEEDED deploy/rollback proved its whole unit through the
        router (Operation.proven; whether it is known-good is dsv4ops.journal.knowngood's)."""
        current = self.get(op_id)
        check_transition(current.status, status)
        known_good = fields.get("known_good", False)
        if known_good and status is not Status.SUCCEEDED:
            raise JournalError(f"only a SUCCEEDED operation can be known-good, not {status.value}")
        self._append(
            StatusRecord(
                op_id,
                self._now(),
                status,
                message=fields.get("message"),
                running=fields.get("running"),
                processes=fields.get("processes") or None,
                kernel=fields.get("kernel") or None,
                known_good=known_good or None,
            )
        )

    def end_unread(self, op_id: str, status: Status, *, message: str, running: str) -> None:
        """Record `op_id`'s end without reading the journal first: for an operation whose
        journal cannot be written, so reads fail (orchestrate/unrecorded.py)."""
        self._append(StatusRecord(op_id, self._now(), status, message=message, running=running))

    def step(
        self,
        op_id: str,
        name: str,
        phase: str,
        *,
        duration_s: float | None = None,
        detail: str | None = None,
        defer: bool = False,
        gate: GateResult | None = None,
    ) -> None:
        """Record that a step starts ('start') or ended ('done' / 'failed'); `gate`: what the
        gate this step ran judged (journal/gates.py), on the record that ends it. `defer`: sent
        with the next append, read or flush() (docs/deploy.md, "The journal")."""
        record = StepRecord(
            op_id,
            self._now(),
            name,
            phase,
            duration_s=None if duration_s is None else round(duration_s, 3),
            detail=detail or None,
            gate=gate,
        )
        if defer:
            self._deferred.append(self._encode(record))
        else:
            self._append(record)

    def flush(self) -> None:
        """Append the deferred records now (nothing when there are none)."""
        if self._deferred:
            self._write(b"")

    def _now(self) -> str:
        return utc_now_iso(self._clock)

    def _encode(self, record: Record) -> bytes:
        return recordfile.encode(scrub(to_json(record)))

    def _append(self, *records: Record) -> None:
        self._write(b"".join(self._encode(r) for r in records))

    def _write(self, data: bytes) -> None:
        held, self._deferred = b"".join(self._deferred), []
        try:
            self.backend.append(held + data, lock_op=self._lock_op)
        except BaseException as exc:
            # Not written: a later append or flush retries (unless the record has it already).
            kept = held + data if self.keep_unwritten else held
            if kept and not getattr(exc, "written", False):
                self._deferred.insert(0, kept)
            raise

    def unwritten(self) -> list[Record]:
        """The records held in memory because they could not be written yet, in order."""
        parsed = recordfile.parse(b"".join(self._deferred))[0]
        return [parse_record(r, f"unwritten record {n}") for n, r in parsed]

    def keep_elsewhere(self) -> str | None:
        """Hand the unwritten records to the backend's fallback (the target's record: the local
        cache, merged into the record by the next command); where they went, None if nowhere."""
        keep = getattr(self.backend, "keep", None)
        data = b"".join(self._deferred)
        if not data or keep is None:
            return None
        try:
            where = str(keep(data))
        except (OSError, DsOpsError):
            return None
        self._deferred = []
        return where

    # -- reading -------------------------------------------------------------------------------

    def _view(self) -> View:
        """The journal now, through its index: only the operations asked for are read."""
        self.flush()  # a read sees this object's own records
        self.backend.refresh(lock_op=self._lock_op)
        if self.backend.path != self.path:  # the cache moved (unwritable: journal/target.py)
            self.path = self.backend.path
            self._index, self._loaded = Index(str(self.path), self._notify), {}
        try:
            view = View(self._index, self._loaded)
        except OSError as exc:
            raise JournalError(f"cannot read journal {self.path}: {exc.strerror}") from exc
        self.skipped_lines = list(view.state.skipped)
        for line in view.warnings():
            if line not in self._told:
                self._told.add(line)
                self._notify(line)
        return view

    def warnings(self) -> list[str]:
        """Lines the journal holds that are no record of their operation (journal/damage.py)."""
        return self._view().warnings()

    def _refuse_if_damaged(self) -> None:
        """Nothing changes while a line no one can read (maybe a gate FAIL) is unmended; read
        off this object's last read (docs/deploy.md, "A line that is no record")."""
        state = self._index.last
        if state is None or not (state.damaged or state.orphans):
            return
        if state.damaged:
            n, why = state.damaged[0]
        else:
            op, lines = next(iter(state.orphans.items()))
            n, why = lines[0], f"{self.path}:{lines[0]}: operation {op} has no readable begin"
        where = self.source().get("record") or str(self.path)
        raise JournalError(
            f"{why}; nothing was changed: no operation begins while the journal holds a line it "
            "cannot read",
            hint=f"look at it (`sed -n {n}p {self.path}`), mend that line of the "
            f"journal of record {where} by hand (it is append-only: nothing in dsv4ops rewrites "
            f"it), then retry; {command('journal', self.target)} and "
            f"{command('status', self.target)} read the rest meanwhile",
        )

    def sync(self) -> None:
        """Read the journal once (a target's record: its cache synced), as every read does."""
        self._view()

    def tail_records(self, n: int) -> list[Record]:
        """The last `n` valid records, read from the end of the journal only."""
        return self._view().tail(n)

    def operations(self) -> Operations:
        """The operations in the journal's order (a lazy Sequence, see journal/lazy.py)."""
        return Operations(self._view())

    def listing(
        self, limit: int
    ) -> tuple[list[Operation], Mapping[str, Judgement], list[JSONObject]]:
        """One read for `dsv4ops journal`: the last `limit` operations (all when <= 0), the
        known-good judgement of every deploy/rollback (over the whole journal), the merges."""
        view = self._view()
        ops = Operations(view)
        shown = ops[-limit:] if limit > 0 else list(ops)
        return shown, Judgements(view), [to_json(m) for m in view.merges()]

    def get(self, op_id: str) -> Operation:
        """The operation with this id (or unique id prefix); raise JournalError if none."""
        if not op_id.strip():  # a prefix of every id: with one operation it would be that one
            raise JournalError(f"an empty operation id names no journal entry in {self.path}")
        view = self._view()
        exact = view.entry(op_id)
        if exact is not None:
            return view.load(exact)
        matches = Operations(view).prefixed(op_id)
        if len(matches) != 1:
            what = "no" if not matches else "more than one"
            raise JournalError(f"{what} journal entry matches {op_id!r} in {self.path}")
        return matches[0]

    def in_flight(self) -> list[Operation]:
        """Operations that never reached a terminal status (a CLI that died mid-way). A runbook
        run is not one of them: it changes nothing itself and stays open until it is resumed."""
        view = self._view()
        live = view.walk("live = 1 AND kind != 'runbook'")
        return [view.load(e) for e in live]

    def known_good(self) -> Sequence[Operation]:
        """Known-good deployments in rollback's order (journal/knowngood.py; lazy.KnownGood)."""
        return KnownGood(self._view())

    def judged(self) -> Mapping[str, Judgement]:
        """op id -> whether that deploy/rollback is known-good and why (the same rule)."""
        return Judgements(self._view())

    def last_known_good(self, *, exclude: str | None = None) -> Operation | None:
        """The newest known-good deployment (other than `exclude`), by the same rule."""
        return next((o for o in KnownGood(self._view()) if o.op != exclude), None)

    def deployed(self) -> Operation | None:
        """The operation whose deployment runs now per the journal (None: nothing or unknown)."""
        view = self._view()
        e = view.newest("live = 0 AND running IS NOT NULL")
        ran = None if e is None or e.running in ("", UNKNOWN) else view.entry(str(e.running))
        return None if ran is None else view.load(ran)

    def deployed_is_unknown(self) -> Operation | None:
        """The operation that left the target in an unknown state, if that is the latest word."""
        view = self._view()
        e = view.newest("kind != 'runbook' AND (live = 1 OR running IS NOT NULL)")
        if e is None or (e.terminal and e.running != UNKNOWN):
            return None
        return view.load(e)
