"""While one component's readiness is awaited, the components this run started before it must
still be running.

A prefill killed while the decode starts leaves the router's /readiness at 503 for as long as
the router waits (180 s on the box, all of it spent on a unit that can no longer come up); the
readiness wait only watches its own component's process. Between the wait's slices the runner
asks for the others too and fails the step at once, naming the one that exited and its log.
"""

from __future__ import annotations

from collections.abc import Mapping

from dsv4ops.orchestrate.control import TargetControl

LOG_LINES = 20


def exited_meanwhile(
    control: TargetControl, started: Mapping[str, int | None], waiting_for: str
) -> str | None:
    """Why the wait for `waiting_for` cannot end well (an earlier component of the run exited,
    with its last log lines), or None while every one of them is alive."""
    others = [name for name in started if name != waiting_for]
    if not others:
        return None
    states = control.status(others)
    for name in others:
        state = states.get(name)
        if state is not None and state.alive:
            continue
        pid = started[name]
        tail = control.log_tail(name, lines=LOG_LINES).rstrip()
        return (
            f"{name} (pid {pid}, started by this run) exited while waiting for {waiting_for}: "
            f"the unit cannot come up without it"
            + (f"\n--- last log lines of {name} ---\n{tail}" if tail else "")
        )
    return None
