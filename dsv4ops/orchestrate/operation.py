"""One journaled operation on a target: the lock, the journal's begin and transitions, the
release, and signals, in one place for deploy, rollback, stop and kernel switches.

`journaled_operation(...)` is a context manager:

1. installs the SIGINT/SIGTERM gate (interrupts.py) for the operation;
2. takes the target's deploy lock (lockstep.py: a live holder refuses, a dead one's lock is
   cleared when the journal shows its operation ended, broken with `recover`, else refused; an
   operation the journal shows never ended blocks until `recover` marks it ABANDONED), with a
   signal meanwhile held until the journal can know about the operation;
3. yields a `RunningOperation` whose `begin(...)` journals the operation and moves it to RUNNING, and
   whose `finish(...)` journals its terminal status: both shielded from a signal cutting them;
4. meanwhile appends to the journal as the lock's holder (`Journal.under_lock`): the target's
   record refuses them once another operation holds the lock;
5. releases the lock on the way out, whatever happened (a failed release is left for the next
   command, which sees in the journal that this operation ended).

A refusal by the lock raises before anything is journaled: a refused operation changed nothing.

`nested_operation(...)` is the same for an operation run inside another one that holds the lock
for both (an A/B experiment's block deploys): no lock of its own, the caller's gate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Unpack

from dsv4ops.errors import DsOpsError
from dsv4ops.journal.gates import GateResult
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.schema import BeginFields, TransitionFields
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.interrupts import InterruptGate
from dsv4ops.orchestrate.lockstep import release_lock, take_lock

Progress = Callable[[str], None]


@dataclass
class RunningOperation:
    """The operation in progress: its journal id, what resolving the lock noted, its gate."""

    journal: Journal
    kind: Kind
    op_id: str
    gate: InterruptGate
    notes: list[str] = field(default_factory=list)
    begun: bool = False
    ended: bool = False

    def begin(self, **record: Unpack[BeginFields]) -> None:
        """Journal the operation (`record`: Journal.begin's fields) and move it to RUNNING."""
        with self.gate.holding():  # a signal now is raised once the journal knows the operation
            self.journal.begin(self.kind, op_id=self.op_id, **record)
            self.journal.transition(self.op_id, Status.RUNNING)
        self.begun = True
        self.journal.keep_unwritten = True  # from now on a record that fails is kept

    def step(
        self,
        name: str,
        phase: str,
        *,
        gate: GateResult | None = None,
        duration_s: float | None = None,
        detail: str | None = None,
        defer: bool = False,
    ) -> None:
        """Journal a step (Journal.step's fields); `gate`: what the gate it ran judged
        (journal/gates.py)."""
        with self.gate.holding():
            self.journal.step(
                self.op_id,
                name,
                phase,
                duration_s=duration_s,
                detail=detail,
                defer=defer,
                gate=gate,
            )

    def finish(self, status: Status, **fields: Unpack[TransitionFields]) -> None:
        """Journal the terminal status (`fields`: Journal.transition's); a signal cannot cut it."""
        with self.gate.shielded():
            self.journal.transition(self.op_id, status, **fields)
        self.ended = True


@contextlib.contextmanager
def journaled_operation(
    control: TargetControl,
    journal: Journal,
    kind: Kind,
    *,
    command: str,
    recover: bool = False,
    progress: Progress | None = None,
    gate: InterruptGate | None = None,
    op_id: str | None = None,
) -> Iterator[RunningOperation]:
    """Lock the target for one operation of `kind`; see the module docstring."""
    say = progress or (lambda _line: None)
    gate = gate or InterruptGate()
    op = RunningOperation(journal, kind, op_id or journal.new_op_id(kind), gate)
    with gate.installed(), journal.under_lock(op.op_id):
        with gate.holding():
            op.notes += take_lock(control, journal, op.op_id, command, recover, say)
        try:
            yield op
        finally:
            with gate.shielded():
                release_lock(control, op.op_id, say)


@contextlib.contextmanager
def nested_operation(
    journal: Journal, kind: Kind, parent: RunningOperation, *, gate: InterruptGate
) -> Iterator[RunningOperation]:
    """An operation of `kind` inside `parent`, which took the deploy lock (and resolved what
    earlier operations left) for both: it journals itself like any other; the lock stays
    with `parent`. Raises DsOpsError unless `parent` is begun and not ended."""
    if not parent.begun or parent.ended:
        raise DsOpsError(
            f"{kind.value} cannot run inside {parent.kind.value} {parent.op_id}: "
            "that operation is not in progress"
        )
    yield RunningOperation(journal, kind, journal.new_op_id(kind), gate)
