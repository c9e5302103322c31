"""A settable clock for the twin's time-dependent settings (step drift): returns `t`, moved by hand."""

from __future__ import annotations


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
