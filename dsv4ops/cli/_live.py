"""The CLI's wait observer (dsv4ops/waits.py): what a long step is doing, while it does it.

On a terminal a step that outlasts SHOW_AFTER_S gets one live line on stderr (rich, imported
only then, so `dsv4ops --help` and every short command never load it): what it waits for, the
seconds so far and its bound, and what it last saw, e.g. `wait until decode is ready (/health):
decode /health HTTP 503: loading weights, 42 s of 1200 s`. The line is cleared when the step ends
(the step's own `ok ...` line follows). Off a terminal (CI, `| tee`, `--json`) the same text is a
plain line on stderr every DSV4OPS_PROGRESS_EVERY_S seconds (default 10), so a log shows a step
that is slow, not dead. The seconds are this machine's wall clock: how long you wait.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from dsv4ops.cli._output import terminal_safe
from dsv4ops.clock import SystemClock
from dsv4ops.errors import DsOpsError
from dsv4ops.waits import Wait

if TYPE_CHECKING:
    from rich.text import Text

SHOW_AFTER_S = 2.0
EVERY_ENV = "DSV4OPS_PROGRESS_EVERY_S"
DEFAULT_EVERY_S = 10.0


class _Line:
    """One step's line; `observe` comes from the step's thread, `text` from the drawing one."""

    def __init__(self, what: str, deadline_s: float | None, clock: SystemClock) -> None:
        self.what, self.deadline_s, self._clock = terminal_safe(what), deadline_s, clock
        self._t0 = clock.monotonic()
        self.note = ""

    def observe(self, note: str) -> None:
        # one printable line, whatever the server answered (an ESC in it would reach the
        # terminal through the plain line and through rich alike)
        self.note = terminal_safe(" ".join(note.split())[:160])

    def text(self) -> str:
        elapsed = self._clock.monotonic() - self._t0
        bound = f" of {self.deadline_s:.0f} s" if self.deadline_s else ""
        seen = f"{self.note}, " if self.note else ""
        return f"{self.what}: {seen}{elapsed:.0f} s{bound}"

    def __rich__(self) -> Text:  # rich asks on every refresh: the seconds move by themselves
        from rich.text import Text

        return Text(self.text(), style="cyan", no_wrap=True, overflow="ellipsis")


def every_s() -> float:
    raw = os.environ.get(EVERY_ENV, "")
    if not raw:
        return DEFAULT_EVERY_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.1 <= value <= 3600:
        raise DsOpsError(f"{EVERY_ENV}={raw!r}: expected seconds from 0.1 to 3600")
    return value


class LiveWaits:
    """Draws each `waiting` step on `stream` (stderr): live on a terminal, plain lines otherwise."""

    def __init__(self, *, plain: bool = False, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.live = tty and not plain and os.environ.get("TERM", "") != "dumb"
        self.every_s = every_s()
        self._clock = SystemClock()

    @contextlib.contextmanager
    def waiting(self, what: str, deadline_s: float | None) -> Iterator[Wait]:
        line = _Line(what, deadline_s, self._clock)
        done = threading.Event()
        drawer = threading.Thread(
            target=self._draw, args=(line, done), daemon=True, name="dsv4ops-progress"
        )
        drawer.start()
        try:
            yield line
        finally:
            done.set()
            drawer.join(timeout=5.0)

    def _draw(self, line: _Line, done: threading.Event) -> None:
        if done.wait(SHOW_AFTER_S if self.live else self.every_s):
            return  # a short step: nothing to show
        if self.live:
            try:
                self._draw_live(line, done)
                return
            except ImportError:  # rich missing from a partial install: plain lines still say it
                pass
        while True:
            print(line.text(), file=self.stream, flush=True)
            if done.wait(self.every_s):
                return

    def _draw_live(self, line: _Line, done: threading.Event) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream, highlight=False)
        # transient: the line is gone when the step ends; redirect: lines printed meanwhile (a
        # drain's progress) appear above it instead of tearing it.
        with Live(
            line,
            console=console,
            refresh_per_second=4,
            transient=True,
            redirect_stdout=True,
            redirect_stderr=True,
        ):
            done.wait()
