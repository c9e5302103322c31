"""Run a parsed runbook: steps in order, each command's exit code checked against its expectation.

The command executor, the confirmation prompt, the Enter-to-continue pause and the output are
injected, so the order, the stop-at-first-failure message, --from and --dry-run are tested
without processes. Every dsv4ops command the runbook runs journals itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dsv4ops.errors import DsOpsError
from dsv4ops.runbooks.parse import Command, Runbook, RunbookError, Step, join

# argv (starting with "dsv4ops"), extra environment -> exit code
Execute = Callable[[Sequence[str], Mapping[str, str]], int]
TARGET_ENV = "DSV4OPS_TARGET"  # a command without --target still goes to the run's target


class RunbookFailed(DsOpsError):
    """A runbook command exited with an unexpected code; the runbook stopped there (exit 2)."""

    exit_code = 2


class RunbookStopped(DsOpsError):
    """The operator declined a step that changes the target; nothing after it ran (exit 1)."""


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


def selected_steps(runbook: Runbook, start: int | None) -> list[Step]:
    """The steps from number `start` on (all when None). Raises RunbookError for an unknown step."""
    if start is None:
        return list(runbook.steps)
    first = runbook.steps.index(runbook.step(start))
    return list(runbook.steps[first:])


def run(s: Session) -> list[Ran]:
    """Run the session; return what ran. Raises RunbookFailed (2), RunbookStopped or
    RunbookError (1); KeyboardInterrupt propagates after saying what ran."""
    steps = selected_steps(s.runbook, s.start)
    values = {**(s.variables or {}), "target": s.target}
    # Resolve every command first: a missing --var stops the run before anything changes.
    selected = [
        *(s.runbook.rehearse if s.rehearse else ()),
        *(c for st in steps for c in st.commands),
    ]
    missing = sorted(set().union(*(c.placeholders for c in selected)) - set(values))
    if missing:
        raise RunbookError(
            f"{s.runbook.path}: no value for {', '.join('{' + m + '}' for m in missing)}",
            hint="pass " + " ".join(f"--var {m}=VALUE" for m in missing),
        )
    phases: list[tuple[str, Step | None, list[tuple[Command, list[str]]]]] = []
    if s.rehearse:
        phases.append(("rehearse", None, [(c, c.resolve(values)) for c in s.runbook.rehearse]))
    for st in steps:
        phases.append((f"step {st.number}", st, [(c, c.resolve(values)) for c in st.commands]))
    ran: list[Ran] = []
    history: list[str] = []
    mode = " (dry run: nothing is run)" if s.dry_run else ""
    s.echo(f"runbook {s.runbook.name}: {s.runbook.title} -- target {s.target}{mode}")
    try:
        for where, step, commands in phases:
            _announce(s, where, step, commands)
            if not commands:
                _manual(s, where)
                history.append(f"{where}: manual")
                continue
            if any(c.mutating for c, _ in commands) and not (s.yes or s.dry_run):
                question = f"{where} changes {s.target}: run it?"
                if not s.confirm(question):
                    raise RunbookStopped(
                        f"stopped at {where}: not confirmed; nothing after it ran.\n"
                        + _before(history, s.target),
                        hint=_resume_hint(s, step),
                    )
            for cmd, argv in commands:
                shown = join(argv)
                s.echo(
                    f"$ {shown}"
                    + (f"  # expect exit {cmd.expect_text()}" if cmd.expect != {0} else "")
                )
                if s.dry_run:
                    continue
                code = s.execute(argv, {TARGET_ENV: s.target})
                ran.append(Ran(where, shown, code))
                if code not in cmd.expect:
                    raise RunbookFailed(
                        f"{where} of runbook {s.runbook.name} failed: `{shown}` exited {code}, "
                        f"expected {cmd.expect_text()}.\n" + _before(history, s.target),
                        hint=_resume_hint(s, step),
                    )
                history.append(f"{where}: `{shown}` exited {code} as expected")
    except KeyboardInterrupt:
        s.echo(f"interrupted.\n{_before(history, s.target)}")
        raise
    if s.dry_run:
        s.echo(f"dry run: {sum(len(c) for _, _, c in phases)} command(s) would run")
    else:
        s.echo(f"runbook {s.runbook.name}: every step met its expectation ({len(ran)} command(s))")
    return ran


def _announce(s: Session, where: str, step: Step | None, commands: list) -> None:
    if step is None:
        s.echo("== rehearse: reproduce the incident on the twin")
        return
    flag = " [changes the target: asks first]" if step.needs_confirmation else ""
    s.echo(f"== {where}: {step.title}{flag}" + ("" if commands else " (manual)"))
    for line in step.text.splitlines():
        s.echo(f"   {line}" if line else "")


def _manual(s: Session, where: str) -> None:
    if s.dry_run:
        return
    if s.yes:
        s.echo(f"   ({where} is manual; --yes given, not waiting)")
        return
    s.pause(f"{where} is manual: press Enter when it is done (Ctrl-C stops the runbook)")


def _before(history: list[str], target: str) -> str:
    """What ran before the stop, one line each, and where to look now."""
    done = "".join(f"\n  {h}" for h in history) if history else " nothing."
    return (
        f"Before it:{done}\nThe target is in whatever state those commands left it: "
        f"check `dsv4ops status --target {target}`."
    )


def _resume_hint(s: Session, step: Step | None) -> str:
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
