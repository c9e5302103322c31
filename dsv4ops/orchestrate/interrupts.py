"""Ctrl-C and SIGTERM during an operation: a failure like any other, journaled and handled.

While a deploy, rollback or stop runs, SIGINT and SIGTERM raise `OperationInterrupted` (a
KeyboardInterrupt, so no `except Exception` swallows it) at once, except while a step that must
not be cut in half runs (starting or stopping a process, writing the operation's final journal
record, releasing the lock): then the signal is held and raised as soon as that step is done.
The engine turns it into `Interrupted`, a StepFailed, so the operation rolls back to the last
known-good deployment by the same path as for any failed step. A second signal during that
rollback stops it: the journal then says what was left and the one command that fixes it.

Signal handlers can only be installed in the main thread; elsewhere (tests driving an Operator
from a thread) the gate does nothing and a KeyboardInterrupt is still handled the same way.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from dsv4ops import exitcodes
from dsv4ops.errors import DeployError

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class OperationInterrupted(KeyboardInterrupt):
    """Raised by the gate's handler; `signal_name` is SIGINT or SIGTERM."""

    def __init__(self, signal_name: str = "SIGINT") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def signal_name_of(exc: BaseException) -> str:
    return getattr(exc, "signal_name", "SIGINT")


class DeployInterrupted(DeployError):
    """The operation was interrupted and handled: exit 130 with the message saying what runs."""

    exit_code = exitcodes.INTERRUPTED


class InterruptGate:
    """Installs the SIGINT/SIGTERM handlers for one operation; holds signals during safe steps."""

    def __init__(self) -> None:
        self.received: list[str] = []  # every signal seen, in order
        self._held: str | None = None  # a signal that arrived while holding, not yet raised
        self._holding = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[InterruptGate]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        try:
            yield self
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if self._holding:
            self._held = self._held or name
            return
        raise OperationInterrupted(name)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Run a step that must finish: a signal meanwhile is kept for `take_held`."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Final bookkeeping: a signal meanwhile is only recorded (the operation is ending)."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            self._held = None

    def take_held(self) -> str | None:
        """The signal held during the last safe step (then forgotten), or None."""
        if self._holding:
            return None
        name, self._held = self._held, None
        return name

    def raise_held(self) -> None:
        name = self.take_held()
        if name:
            raise OperationInterrupted(name)
