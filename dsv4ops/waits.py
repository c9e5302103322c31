"""What a long step tells whoever watches it: the wait seam.

The engine, the kernel builder and the other layers print nothing (docs/architecture.md); a step
that can take long (a readiness wait while a model loads, a stop's grace, a drain, a build) runs
inside `observer.waiting(what, deadline_s)` and reports what it last saw with `observe(note)`.
The CLI's observer (`cli/_live.py`) draws it: a live line on a terminal, a plain line every few
seconds on stderr otherwise. `QUIET` is the observer of everything the CLI did not compose
(tests, the library use).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol


class Wait(Protocol):
    def observe(self, note: str) -> None:
        """The last thing seen (e.g. "decode: /health HTTP 503: loading weights")."""
        ...


class WaitObserver(Protocol):
    def waiting(
        self, what: str, deadline_s: float | None
    ) -> contextlib.AbstractContextManager[Wait]:
        """A step that may take long; `deadline_s` its bound in seconds, None when unbounded."""
        ...


class _Unwatched:
    def observe(self, note: str) -> None:
        pass


class Quiet:
    """The observer that shows nothing."""

    @contextlib.contextmanager
    def waiting(self, what: str, deadline_s: float | None) -> Iterator[Wait]:
        yield _Unwatched()


QUIET: WaitObserver = Quiet()
UNWATCHED: Wait = _Unwatched()
