"""The drain step's watch: poll the router's liveness and the workers' loads until the router has
exited and no worker is busy, or the bound runs out; then say what was seen.

The runner (`engine.py`) sends the router its SIGTERM and keeps the router's drain state; this
module only polls and words the result. A worker whose /metrics cannot be read is UNKNOWN, never
idle, unless the target says it is not running (then it has nothing in flight: known, not unknown).

A busy decode whose progress counter (`realtime_tokens_total{mode="decode"}`) does not move for
`stall_s` is wedged: its streams will never finish, so waiting for them only spends the bound
(12-18 s of a rollback from a wedge went there). The watch stops at once and says so; the stop
that follows ends the decode.

A busy prefill whose decode is not running holds requests that cannot finish: in PD each one
waits for the decode to take its KV (0.5.23 fails it only at its bootstrap timeout, 300 s), so
waiting for them only spends the bound (15 s of a rollback after a decode crash went there). The
watch stops at once and says so, as for a wedge.

An idle reading is not trusted alone: SGLang 0.5.23 publishes `num_running_reqs` every
`--decode-log-interval` iterations, so the gauge can read 0 while a stream is still open, but it
moves the progress counter every iteration. A worker is drained only once it read idle across
polls at least `idle_confirm_s` apart with its counter unmoved; a counter that moves under a 0
gauge is a request still decoding (counted as one in flight).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dsv4ops.clock import Clock
from dsv4ops.deployment import Component
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.workload import Load, load_of, metrics_request

# The slowest decode step to allow for (as the alert rules: ~18 + 1.05*96 ms on the box, with room).
MAX_STEP_S = 0.15


def no_progress_bound_s(decode: Component, log_interval: int) -> float:
    """Wall seconds a busy decode's progress counter may stand still before it is judged wedged:
    one `--decode-log-interval` of steps at the slowest step (0.5.23 moves the counter every
    iteration; its help text promises at worst every log interval), at least 1 s of polls. A
    twin's model time runs at its DSV4_TWIN_TIME_SCALE (the one twin setting read here)."""
    try:
        scale = float(decode.env.get("DSV4_TWIN_TIME_SCALE", "1") or 1.0)
    except ValueError:
        scale = 1.0
    return max(1.0, log_interval * MAX_STEP_S * max(scale, 0.0))


def idle_confirm_s(workers: list[Component]) -> float:
    """Wall seconds an idle reading must hold, counter unmoved: two of the slowest decode steps
    (each moves the counter), at least 0.3 s (three polls)."""
    decode = next((c for c in workers if c.name == "decode"), None)
    try:
        scale = float((decode.env if decode else {}).get("DSV4_TWIN_TIME_SCALE", "1") or 1.0)
    except ValueError:
        scale = 1.0
    return max(0.3, 2 * MAX_STEP_S * max(scale, 0.0))


class DrainWatch:
    """One drain's polling and what it saw: the peak in-flight count per worker, the workers
    whose load is unknown, the ones found not running."""

    def __init__(
        self,
        control: TargetControl,
        workers: list[Component],
        *,
        clock: Clock,
        progress: Callable[[str], None],
        with_router: bool,
        router_up: bool,
        t0: float,
        stall_s: float | None = None,
    ) -> None:
        self.control, self.workers = control, workers
        self.stall_s = stall_s
        self.stalled: dict[str, str] = {}  # worker -> why it was not waited for (wedged, orphaned)
        self._progress_at: dict[str, tuple[float, float]] = {}  # worker -> (counter, since)
        self.clock, self.progress = clock, progress
        self.with_router, self.router_up, self.t0 = with_router, router_up, t0
        self.peak: dict[str, float] = {}
        self.unknown: dict[str, str] = {}
        self.down: set[str] = set()
        self._last_line, self._last_at = "", -1e9
        self.confirm_s = idle_confirm_s(workers)
        self._idle_since: dict[str, tuple[float | None, float]] = {}  # worker -> (counter, since)
        self.moving: set[str] = set()  # workers whose counter moved under a 0 gauge last poll

    def wait(self, bound_s: float) -> dict[str, Load] | None:
        """Poll every 0.1 s until the router is gone and no worker is busy (None), or until
        `bound_s` after t0 (the loads still busy then)."""
        deadline = self.t0 + bound_s
        while True:
            was_up = self.router_up
            if self.router_up:
                self.router_up = bool(self.control.status(["router"])["router"].alive)
            loads = self._read_loads()
            busy = {n: ld for n, ld in loads.items() if ld.busy}
            for n, ld in busy.items():
                self.peak[n] = max(self.peak.get(n, 0.0), (ld.running or 0.0) + (ld.queued or 0.0))
            now = self.clock.monotonic()
            settled = self._settled(loads, now)  # every poll: the router's drain time included
            self._say(now, loads, router_changed=was_up != self.router_up)
            if not self.router_up and not busy and settled:
                return None
            if self._wedged(busy, now) or self._orphaned(busy):
                return busy
            if now >= deadline:
                return busy
            self.clock.sleep(0.1)

    def _settled(self, loads: Mapping[str, Load], now: float) -> bool:
        """Every worker read idle for confirm_s with its progress counter unmoved (one that is
        not running or whose load is unknown has nothing more to show)."""
        settled = True
        self.moving.clear()
        for name, load in loads.items():
            if load.busy:
                self._idle_since.pop(name, None)
                settled = False
            elif name in self.down or not load.known:
                continue
            elif (seen := self._idle_since.get(name)) is None or seen[0] != load.decode_tokens:
                if seen is not None:  # moved under a 0 gauge: a request is still decoding
                    self.peak[name] = max(self.peak.get(name, 0.0), 1.0)
                    self.moving.add(name)
                self._idle_since[name] = (load.decode_tokens, now)
                settled = False
            elif now - seen[1] < self.confirm_s:
                settled = False
        return settled

    def _wedged(self, busy: Mapping[str, Load], now: float) -> bool:
        """True once a busy worker's decode counter stood still for stall_s (recorded in
        `stalled`); a worker that is idle or exports no counter is never judged by it."""
        if self.stall_s is None:
            return False
        for name, load in busy.items():
            if load.decode_tokens is None:
                continue
            seen = self._progress_at.get(name)
            if seen is None or seen[0] != load.decode_tokens:
                self._progress_at[name] = (load.decode_tokens, now)
            elif now - seen[1] >= self.stall_s:
                self.stalled[name] = (
                    f"{name} made no progress for {now - seen[1]:.1f}s with {load.running or 0:g} "
                    f"running (realtime_tokens_total frozen at {load.decode_tokens:g}): wedged, "
                    "not drained; stopping it"
                )
        return bool(self.stalled)

    def _orphaned(self, busy: Mapping[str, Load]) -> bool:
        """True when the prefill is busy and the decode is known not running (recorded in
        `stalled`): its requests wait for a decode that will not take their KV."""
        prefill = busy.get("prefill")
        if prefill is None or "decode" not in self.down:
            return False
        self.stalled["prefill"] = (
            f"prefill: {prefill.running or 0:g} running/{prefill.queued or 0:g} queued for a "
            "decode that is not running: they cannot finish (the decode takes their KV), not "
            "waited for; stopping it"
        )
        return True

    def _read_loads(self) -> dict[str, Load]:
        # Every worker's /metrics at once: one agent round trip a poll, not one per worker.
        replies = self.control.http_many(
            [metrics_request(c.url("/metrics"), 3.0) for c in self.workers], timeout_s=3.0
        )
        loads = {c.name: load_of(r) for c, r in zip(self.workers, replies, strict=True)}
        self.unknown = {n: ld.error or "unreadable" for n, ld in loads.items() if not ld.known}
        if self.unknown:
            # A worker that is not running has nothing in flight: that is known, not unknown.
            states = self.control.status(list(self.unknown))
            for n in [n for n in self.unknown if not states[n].alive]:
                del self.unknown[n]
                loads[n] = Load(0.0, 0.0)
                self.down.add(n)
        return loads

    def _say(self, now: float, loads: Mapping[str, Load], *, router_changed: bool) -> None:
        line = _drain_line(self.with_router, self.router_up, loads, self.down, self.moving)
        # At most one progress line a second, except when the router goes away.
        if line != self._last_line and (now - self._last_at >= 1.0 or router_changed):
            self.progress(f"    drain {now - self.t0:5.2f}s: {line}")
            self._last_line, self._last_at = line, now

    def gave_up(self, busy: Mapping[str, Load], bound_s: float) -> str:
        """The step's detail when the bound ran out (the stop goes ahead anyway)."""
        what = ", ".join(
            f"{n}: {ld.running or 0:g} running/{ld.queued or 0:g} queued" for n, ld in busy.items()
        )
        if self.router_up:
            what = "router still up" + (f"; {what}" if what else "")
        return f"gave up waiting after {bound_s:g}s ({what}); stopping anyway" + _unknown_note(
            self.unknown
        )

    def drained(self, router_part: str | None) -> str:
        """The step's detail when the drain finished: the router's part, then the workers'."""
        parts = [router_part] if router_part else []
        if self.peak:
            seen = ", ".join(f"{n} up to {v:g}" for n, v in sorted(self.peak.items()))
            parts.append(f"waited for in-flight requests ({seen})")
        if not self.workers:
            parts.append("no known workers")
        elif self.down == {c.name for c in self.workers}:
            parts.append("workers not running")
        elif len(self.unknown) < len(self.workers):
            parts.append("no requests in flight")
        return "; ".join(parts) + _unknown_note(self.unknown)


def _drain_line(
    with_router: bool,
    router_up: bool,
    loads: Mapping[str, Load],
    down: set[str],
    moving: frozenset[str] | set[str] = frozenset(),
) -> str:
    bits = [f"router {'draining' if router_up else 'gone'}"] if with_router else []
    for n, ld in loads.items():
        if n in down:
            bits.append(f"{n} not running")
        elif ld.running is None:
            bits.append(f"{n} in-flight UNKNOWN ({ld.error or 'metrics unreadable'})")
        else:
            bits.append(
                f"{n} {ld.running:g} running/{ld.queued or 0:g} queued"
                + (" (progress counter moving: in flight)" if n in moving else "")
            )
    return ", ".join(bits) or "no workers known"


def _unknown_note(unknown: Mapping[str, str]) -> str:
    """Unknown is not idle: say so in the step's detail (progress line and journal)."""
    if not unknown:
        return ""
    return "; in-flight requests UNKNOWN on " + ", ".join(
        f"{n} (metrics: {why})" for n, why in sorted(unknown.items())
    )
