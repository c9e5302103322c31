"""What one `runbook run` is asked to do and what it did so far (Session, Progress), the
errors that stop it, and the helpers its steps (steps.py) and its start (resume.py) share.

Its own module so that run.py can import steps.py and resume.py at module level: they import
these names, run.py imports them, and no import goes back (tests/architecture/cycles_test.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dsv4ops import exitcodes
from dsv4ops.clock import Clock, SystemClock
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.store import RUNBOOK_RUN_ENV, Journal
from dsv4ops.runbooks import catalogue
from dsv4ops.runbooks.model import Command, Condition, Runbook, RunbookError, Step
from dsv4ops.runbooks.preconditions import Snapshot
from dsv4ops.runbooks.runlog import RunbookStopped as RunbookStopped  # its home is runlog
from dsv4ops.runbooks.runlog import RunLog
from dsv4ops.whoami import operator_identity

# argv (starting with "dsv4ops"), extra environment -> exit code
Execute = Callable[[Sequence[str], Mapping[str, str]], int]
TARGET_ENV = "DSV4OPS_TARGET"  # a command without --target still goes to the run's target


class RunbookFailed(DsOpsError):
    """A step did not meet its expectation; the runbook stopped there (exit 2)."""

    exit_code = exitcodes.FAILED


class World(Protocol):
    """What the target shows, for preconditions, waits and diagnostics (world.py)."""

    def snapshot(self) -> Snapshot: ...

    def wait(self, conditions: Sequence[Condition], timeout_s: float) -> tuple[bool, str]: ...

    def diagnostics(self, run_id: str, max_bytes: int) -> str: ...


@dataclass(frozen=True)
class Ran:
    """One command that ran: where, what, and its exit code."""

    where: str  # "rehearse" or "step 3"
    command: str
    code: int

    def describe(self) -> str:
        return f"{self.where}: `{self.command}` exited {self.code}"


@dataclass
class Session:
    """What one `runbook run` is asked to do, and the callbacks it reports through."""

    runbook: Runbook
    target: str
    execute: Execute
    confirm: Callable[[str], bool]
    pause: Callable[[str], None]
    echo: Callable[[str], None]
    variables: Mapping[str, str] | None = None
    yes: bool = False
    dry_run: bool = False
    rehearse: bool = False
    start: int | None = None
    world: World | None = None
    journal: Journal | None = None
    resume: str | None = None  # a run id to continue
    interactive: bool = True  # a person can answer prompts (stdin is a terminal)
    clock: Clock = field(default_factory=SystemClock)
    who: Callable[[], str] = operator_identity
    reason: str | None = None  # --reason: journaled with the run
    progress: Progress | None = None  # set by run.run(): what ran so far (--json's result)


@dataclass
class Progress:
    """What the run did so far: the summary printed when it stops, and its journal."""

    log: RunLog | None
    values: dict[str, str]
    ran: list[Ran] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    open_step: str | None = None  # journaled start without an end yet
    would_run: int = 0  # dry run: commands shown
    opened_at: float = 0.0

    @property
    def run_id(self) -> str | None:
        return self.log.op if self.log and self.log.op else None


def selected_steps(runbook: Runbook, start: int | None) -> list[Step]:
    """The steps from number `start` on (all when None). Raises RunbookError for an unknown step."""
    if start is None:
        return list(runbook.steps)
    first = runbook.steps.index(runbook.step(start))
    return list(runbook.steps[first:])


def command_env(s: Session, p: Progress) -> dict[str, str]:
    env = {TARGET_ENV: s.target}
    if p.run_id:
        env[RUNBOOK_RUN_ENV] = p.run_id
    return env


def resolve_all(s: Session, steps: Sequence[Step], values: Mapping[str, str]) -> None:
    """A missing --var, or one that changes what a command is, stops the run before anything
    changes. Raises RunbookError."""
    selected: list[Command] = [
        *(s.runbook.rehearse if s.rehearse else ()),
        *(c for st in steps for c in st.commands),
    ]
    missing = sorted(set().union(*(c.placeholders for c in selected)) - set(values))
    if missing:
        raise RunbookError(
            f"{s.runbook.path}: no value for {', '.join('{' + m + '}' for m in missing)}",
            hint="pass " + " ".join(f"--var {m}=VALUE" for m in missing),
        )
    for c in selected:  # a --var value that changes a command's target or kind: refused now
        c.resolve(values)


def before(history: list[str], target: str) -> str:
    """What ran before the stop, one line each, and where to look now."""
    done = "".join(f"\n  {h}" for h in history) if history else " nothing."
    return (
        f"Before it:{done}\nThe target is in whatever state those commands left it: "
        f"check `dsv4ops status --target {target}`."
    )


def run_command(s: Session) -> str:
    """`dsv4ops runbook run REF --target T` for this runbook, as a shell reads it back."""
    return catalogue.run_command(s.runbook.name, s.runbook.path, s.target)


def resume_command(s: Session, run_id: str) -> str:
    return f"{run_command(s)} --resume {shlex.quote(run_id)}"


def resume_hint(s: Session, p: Progress, step: Step | None) -> str:
    if p.run_id:
        return f"once handled, resume with `{resume_command(s, p.run_id)}`"
    base = run_command(s)
    if step is None:
        return f"fix the rehearsal setup, or skip it: `{base}`"
    return f"once handled, resume with `{base} --from {step.number}`"


def check_rehearsal_target(target: str, launchers: Mapping[str, str]) -> None:
    """--rehearse reproduces an incident: refuse any target not run by the twin. Raises RunbookError."""
    launcher = launchers.get(target)
    if launcher is None:
        raise RunbookError(f"unknown target {target!r} (targets: {', '.join(sorted(launchers))})")
    if launcher != "twin":
        raise RunbookError(
            f"--rehearse reproduces the incident and runs only on a twin target; "
            f"{target!r} has launcher {launcher!r}",
            hint="rehearse with --target twin-local",
        )
