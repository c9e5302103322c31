"""The event loop a canary runs on: uvloop where it is installed, else asyncio's own.

Why: at one SSE event per socket read the loop's own per-read work (select, handle, transport
callback) is a large share of the client's cost; uvloop does it in C. benchmarks/loadgen_capacity.py
measures both side by side. `DSV4OPS_EVENT_LOOP=asyncio` forces the standard loop (to rule the
loop out when a result looks odd).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Never, TypeVar

from dsv4ops.errors import DsOpsError, Terminated

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
    previous = signal.getsignal(signal.SIGTERM)
    with asyncio.Runner(loop_factory=factory) as runner:
        try:
            return runner.run(_cancelled_by_sigterm(coro))
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, previous)  # the loop's removal set the default


async def _cancelled_by_sigterm(coro: Coroutine[object, Never, T]) -> T:
    """`coro`, cancelled by a SIGTERM as asyncio.Runner cancels it on Ctrl-C, then raised as
    Terminated (the CLI's SIGTERM). A KeyboardInterrupt raised by a Python signal handler lands
    in whatever callback runs, and uvloop reports one raised in a transport's callback as a
    "fatal error on transport" and runs on: the suite did not stop."""
    task = asyncio.current_task()
    if task is None or threading.current_thread() is not threading.main_thread():
        return await coro
    loop, termed = asyncio.get_running_loop(), []

    def on_sigterm() -> None:
        termed.append(True)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await coro
    except asyncio.CancelledError:
        if termed:
            raise Terminated() from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
