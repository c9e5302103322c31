"""The only place that reads the wall clock or sleeps, so tests can inject a fake clock."""

from __future__ import annotations

import datetime as _dt
import time as _time
from typing import Protocol

# Interval clocks for measurements (the canary's request stamps and durations, its self-check's
# CPU share): the time module's own functions, aliased rather than wrapped so a hot path (one
# stamp per streamed event) pays no extra call. Differences of these are durations; they say
# nothing about the wall clock.
perf_ns = _time.perf_counter_ns
perf_s = _time.perf_counter
cpu_s = _time.process_time


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def now(self) -> _dt.datetime: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time."""

    def monotonic(self) -> float:
        return _time.monotonic()

    def now(self) -> _dt.datetime:
        return _dt.datetime.now(_dt.UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            _time.sleep(seconds)


def utc_now_iso(clock: Clock | None = None) -> str:
    """ISO-8601 UTC timestamp with seconds precision."""
    now = (clock or SystemClock()).now()
    return now.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def age_s(iso: str, clock: Clock | None = None) -> float | None:
    """Seconds from a `utc_now_iso` timestamp to now (None when `iso` is not one)."""
    try:
        then = _dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    if then.tzinfo is None:
        return None
    return round(((clock or SystemClock()).now() - then).total_seconds(), 1)


def seconds_between(start_iso: str, end_iso: str) -> float | None:
    """Seconds from one journal timestamp (utc_now_iso) to another; None when either does not
    parse or the second is earlier (an A/B plan times recorded deploys with it)."""
    try:
        seconds = (
            _dt.datetime.fromisoformat(end_iso) - _dt.datetime.fromisoformat(start_iso)
        ).total_seconds()
    except (ValueError, TypeError):
        return None
    return seconds if seconds >= 0 else None
