"""Operation ids such as 'd-20261129T150102-3fa9': sortable by time, never drawn twice by one
process (thirty draws in one second once met a 1-in-65,536 pair and folded two operations into
one); two processes in one second are left to that chance."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable

_drawn: set[str] = set()  # every id this process drew (a CLI draws a handful)
_guard = threading.Lock()  # deploys run in threads of one process (tests, the A/B's blocks)


def draw(prefix: str, stamp: str, token: Callable[[int], str] | None = None) -> str:
    """A new id for an operation begun at `stamp` (its UTC second, '20261129T150102'), unlike
    any this process drew before (`token`: the random part, `secrets.token_hex` unless a test
    gives its own)."""
    token = token or secrets.token_hex
    with _guard:
        while True:
            op = f"{prefix}-{stamp}-{token(2)}"
            if op not in _drawn:
                _drawn.add(op)
                return op
