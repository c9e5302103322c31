"""How an operation ended (`Outcome`), and the one rule that turns it into the CLI's exit."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TypedDict

from dsv4ops import exitcodes
from dsv4ops.errors import DeployError
from dsv4ops.orchestrate.interrupts import DeployInterrupted


class StepRecord(TypedDict):
    """One step as an Outcome's `steps` (steplog.py's StepTiming, its fields in order)."""

    title: str
    action: str
    component: str | None
    duration_s: float
    ok: bool
    detail: str


@dataclass(kw_only=True)
class Outcome:
    """How an operation ended, for the CLI's printing, --json and its exit code."""

    ok: bool
    op_id: str | None = None
    kind: str
    status: str
    profile: str | None = None
    message: str
    running: str | None = None  # what runs now ("nothing", "unknown", profile @ commit)
    total_s: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)
    ready_wait_s: dict[str, float] = field(default_factory=dict)
    probe: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False  # SIGINT/SIGTERM arrived (the CLI exits 130)

    @property
    def exit_code(self) -> int:
        """What `raise_for` makes of it (dsv4ops/exitcodes.py)."""
        if self.interrupted:
            return exitcodes.INTERRUPTED
        return exitcodes.OK if self.ok else exitcodes.FAILED

    def to_json(self) -> dict[str, object]:
        """The operation's `--json` document; also the one object an error prints (`exit`,
        `error`: its first line, `hint`), as every command's error under --json has them."""
        first = (self.message.splitlines() or [""])[0]
        return {
            **asdict(self),
            "exit": self.exit_code,
            "error": None if self.ok and not self.interrupted else first,
            "hint": None,
        }


def raise_for(out: Outcome) -> None:
    """A handled failure exits 2 with its message; an interrupted operation exits 130 (its
    message says what was done and what runs now, rolled back or not)."""
    if out.interrupted:
        raise DeployInterrupted(out.message)
    if not out.ok:
        raise DeployError(out.message)
