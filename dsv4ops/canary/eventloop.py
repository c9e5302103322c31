"""The event loop a canary runs on: uvloop where it is installed, else asyncio's own.

Why: at one SSE event per socket read the loop's own per-read work (select, handle, transport
callback) is a large share of the client's cost; uvloop does it in C. benchmarks/loadgen_capacity.py
measures both side by side. `DSV4OPS_EVENT_LOOP=asyncio` forces the standard loop (to rule the
loop out when a result looks odd).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Never, TypeVar

from dsv4ops.errors import DsOpsError

T = TypeVar("T")


def loop_factory(kind: str | None = None) -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """(name, factory) of the loop to use: `kind` or $DSV4OPS_EVENT_LOOP, "uvloop" or "asyncio"."""
    kind = kind or os.environ.get("DSV4OPS_EVENT_LOOP", "") or "uvloop"
    if kind not in ("uvloop", "asyncio"):
        raise DsOpsError(
            f"DSV4OPS_EVENT_LOOP={kind!r}: expected uvloop or asyncio",
            hint="unset it for the default (uvloop)",
        )
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
            return "asyncio", asyncio.new_event_loop
        return "uvloop", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def run(coro: Coroutine[object, Never, T], *, kind: str | None = None) -> T:
    """`asyncio.run(coro)` on the chosen loop; `coro` closed unrun if none can be chosen."""
    try:
        _, factory = loop_factory(kind)
    except DsOpsError:
        coro.close()  # else Python warns, after the error, that it was never awaited
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
