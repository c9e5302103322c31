"""Run a parsed runbook: steps in order (or as their branches say), each journaled.

The command executor, the world (preconditions, waits, diagnostics), the journal, the prompts
and the output are injected, so order, branches, expectations, confirmations, resume and Ctrl-C
are tested without processes (and through the real CLI on the twin). A run is a journal
operation of its own (runlog.py); every dsv4ops command a step runs journals itself and names
the run ($DSV4OPS_RUNBOOK_RUN). Ctrl-C anywhere, a prompt included, ends with what ran and the
command that resumes the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsv4ops import exitcodes
from dsv4ops.clock import Clock, SystemClock
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.store import RUNBOOK_RUN_ENV, Journal
from dsv4ops.runbooks.model import Command, Condition, Runbook, RunbookError, Step
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

    def snapshot(self) -> dict[str, Any]: ...

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


def run(s: Session) -> list[Ran]:
    """Run the session; return what ran. Raises RunbookFailed (2), RunbookStopped or
    RunbookError (1); KeyboardInterrupt propagates after saying what ran and how to resume."""
    from dsv4ops.runbooks import resume as R
    from dsv4ops.runbooks import steps as S

    plan = R.plan(s)  # where to start, the values, the journal: checked before anything runs
    p = Progress(plan.log, plan.values)
    mode = " (dry run: nothing is run)" if s.dry_run else ""
    s.echo(f"runbook {s.runbook.name}: {s.runbook.title} -- target {s.target}{mode}")
    if p.run_id:
        s.echo(f"journaled as run {p.run_id}")
    current = plan.first
    try:
        if plan.rehearse:
            S.rehearse(s, p)
        while current is not None:
            current = S.step(s, p, current)
    except KeyboardInterrupt:
        S.close_open_step(s, p, "interrupted")
        s.echo(f"interrupted.\n{before(p.history, s.target)}")
        if p.run_id:
            s.echo(f"resume with: {resume_command(s, p.run_id)}")
        _stopped(s, p, "interrupted (Ctrl-C/SIGTERM)")
        raise
    except DsOpsError as exc:  # a failed step, a refusal: the run ends INTERRUPTED, resumable
        _stopped(s, p, (str(exc).splitlines() or ["stopped"])[0])
        raise
    if s.dry_run:
        s.echo(f"dry run: {p.would_run} command(s) would run")
        return p.ran
    if p.log is not None:
        p.log.finish(f"{len(p.history)} step(s) ended as expected")
    s.echo(f"runbook {s.runbook.name}: every step met its expectation ({len(p.ran)} command(s))")
    return p.ran


def _stopped(s: Session, p: Progress, why: str) -> None:
    """Journal that the run stopped, where `--resume` continues it (never left RUNNING)."""
    if p.log is not None and p.run_id:
        p.log.stop(f"{why[:300]}; resume with `{resume_command(s, p.run_id)}`")


def command_env(s: Session, p: Progress) -> dict[str, str]:
    env = {TARGET_ENV: s.target}
    if p.run_id:
        env[RUNBOOK_RUN_ENV] = p.run_id
    return env


def resolve_all(s: Session, steps: Sequence[Step], values: Mapping[str, str]) -> None:
    """A missing --var stops the run before anything changes. Raises RunbookError."""
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


def before(history: list[str], target: str) -> str:
    """What ran before the stop, one line each, and where to look now."""
    done = "".join(f"\n  {h}" for h in history) if history else " nothing."
    return (
        f"Before it:{done}\nThe target is in whatever state those commands left it: "
        f"check `dsv4ops status --target {target}`."
    )


def resume_command(s: Session, run_id: str) -> str:
    return f"dsv4ops runbook run {s.runbook.name} --target {s.target} --resume {run_id}"


def resume_hint(s: Session, p: Progress, step: Step | None) -> str:
    if p.run_id:
        return f"once handled, resume with `{resume_command(s, p.run_id)}`"
    base = f"dsv4ops runbook run {s.runbook.name} --target {s.target}"
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
