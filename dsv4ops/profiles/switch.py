"""An on/off flag of a profile's `flags`, what it does: the marker each such field of
`profile_spec.FlagsSection` carries (its one declaration; `profile_spec.SWITCHES` lists them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Switch:
    """What an on/off flag of `flags` does, declared on its field: what it renders to (a server
    argv flag when on or off, or an environment variable of 1/0, on the `sides` named), its
    `profile set` name, its `profile list` column, the hazard warning it raises when on, the
    words `profile set` explains a change with, and the canary suite a change of it runs."""

    toggle: str  # `dsv4ops profile set NAME toggle=on|off`
    column: str  # its column in `profile list` (on/off)
    sides: tuple[str, ...]  # the servers it renders on
    on_words: str  # what turning it on changes, as `profile set` says it
    off_words: str
    argv_on: tuple[str, ...] = ()  # server arguments when on
    argv_off: tuple[str, ...] = ()  # server arguments when off
    env: str | None = None  # an environment variable set to 1 (on) or 0 (off)
    # The canary suite a deploy that changes it runs besides smoke (None: smoke only).
    suite: Literal["corruption", "sweep", "soak", "abort-cascade"] | None = None
    warning: tuple[str, str] | None = None  # (code, words) of the warning it raises when on

    def argv(self, on: bool) -> tuple[str, ...]:
        return self.argv_on if on else self.argv_off
