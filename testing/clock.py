"""The test clock: a `dsv4ops.clock.Clock` whose sleep() advances time at once (tests only; the
package ships SystemClock alone)."""

from __future__ import annotations

import datetime as _dt


class FakeClock:
    """Deterministic clock for tests: sleep() advances time instantly."""

    def __init__(self, start: float = 1000.0) -> None:
        self._t = start
        self._epoch = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)

    def monotonic(self) -> float:
        return self._t

    def now(self) -> _dt.datetime:
        return self._epoch + _dt.timedelta(seconds=self._t)

    def sleep(self, seconds: float) -> None:
        self._t += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        self._t += seconds
