"""`runbook abandon RUN_ID`: close a run that stopped and will not be resumed.

A run that stopped (a failed step, a refusal, Ctrl-C, a killed process) stays open: `status`
lists it with its resume command until it is resumed to its end. When the incident was handled
another way, the person on call closes it here. Abandoning changes nothing on the target: what
the run's steps did stays done (`dsv4ops journal` shows it); the run's record ends ABANDONED,
with who and why, so `status` stops listing it and `--resume` refuses it.

The abandon claims the run as a resume does (`RunLog.claim`): of an abandon and a resume racing,
the claim that reached the journal first wins and the other changes nothing. A run some live
process holds is refused; one held by a process on another machine (which cannot be judged from
here) only when a person at a terminal says that process is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dsv4ops.journal.commands import command
from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from dsv4ops.runbooks.catalogue import run_command
from dsv4ops.runbooks.model import RunbookError
from dsv4ops.runbooks.runlog import RunbookStopped, RunLog, RunRecord, held_by, load, run_state


@dataclass(frozen=True)
class Abandoned:
    """A run closed by `runbook abandon`: which, what it was, and where it had stopped."""

    run: str
    runbook: str
    target: str
    was: str  # its state before: INTERRUPTED (or RUNNING with its process gone)
    stopped_at: str  # "step N", "its end", or "its start"
    message: str  # as journaled (a dry run: what it would journal)
    shown_by: str  # the command that shows the run's steps (`dsv4ops journal --target T`)
    dry_run: bool = False  # checked only: nothing was written

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run,
            "runbook": self.runbook,
            "target": self.target,
            "was": self.was,
            "stopped_at": self.stopped_at,
            "status": self.was if self.dry_run else Status.ABANDONED.value,
            "message": self.message,
            "shown_by": self.shown_by,
            "dry_run": self.dry_run,
        }


def abandon(
    journal: Journal,
    run_id: str,
    *,
    target: str,
    who: str,
    reason: str | None,
    confirm: Callable[[str], bool],
    interactive: bool,
    yes: bool,
    dry_run: bool = False,
) -> Abandoned:
    """Close the run `run_id` (id or unique prefix) of `target`'s journal ABANDONED, once a
    person said yes (`confirm`, asked only when `interactive`; `yes`: --yes, asked nothing but
    whether a holder on another machine is gone). Raises RunbookError (not a run, another
    target's, already ended) or RunbookStopped (held by a live process, claimed first by
    another, declined, or no one to ask). `dry_run`: every check, then nothing asked or
    written."""
    rec = load(journal, run_id)
    if rec.target and rec.target != target:
        raise RunbookError(
            f"run {rec.op} ran against {rec.target!r}, not {target!r}; nothing changed",
            hint=command("runbook abandon", rec.target, rec.op),
        )
    if rec.status.terminal:
        raise RunbookError(
            f"run {rec.op} already ended {rec.status.value}; there is nothing to abandon",
            hint=f"{command('journal', target)} shows it",
        )
    over = _check_held(rec, target, confirm if interactive else None)
    was, _ = run_state(journal.get(rec.op))
    stopped_at = _stopped_at(rec)
    message = (
        f"abandoned by {who}" + (f": {reason}" if reason else "") + f" (it had stopped at "
        f"{stopped_at}, {was}); nothing on the target was changed by abandoning it: what its "
        "steps did stays done"
    )
    out = Abandoned(
        rec.op, rec.runbook, target, was, stopped_at, message, command("journal", target), dry_run
    )
    if dry_run:
        return out
    if not yes:
        _ask(rec, target, f"stopped at {stopped_at}, {was}", confirm if interactive else None)
    log = RunLog(journal)
    log.claim(rec, who, reason, over=over, doing="abandoned")
    journal.transition(rec.op, Status.ABANDONED, message=message)
    return out


def _ask(rec: RunRecord, target: str, state: str, confirm: Callable[[str], bool] | None) -> None:
    question = (
        f"abandon run {rec.op} of {rec.runbook} on {target} ({state})? It cannot be resumed "
        "afterwards; nothing on the target changes"
    )
    if confirm is not None and confirm(question):
        return
    raise RunbookStopped(
        f"run {rec.op} was not abandoned: "
        + ("declined" if confirm is not None else "it asks first, and no terminal is there")
        + "; nothing changed",
        hint=f"{command('runbook abandon', target, rec.op, '--yes')} closes it without asking",
    )


def _stopped_at(rec: RunRecord) -> str:
    at = rec.resume_at
    if at == "end":
        return "its end (every step had run)"
    return f"step {at}" if isinstance(at, int) else "its start"


def _check_held(rec: RunRecord, target: str, confirm: Callable[[str], bool] | None) -> str | None:
    """Refuse a run a live process holds (RunbookStopped); the holder's key when a person said
    the holder on another machine is gone."""
    holder = held_by(rec)
    if holder is None or rec.holder is None:
        return None
    held, where = holder
    question = f"{held}, which cannot be checked from here: is it gone? abandon the run?"
    if where and confirm is not None and confirm(question):
        return rec.holder.key
    resume = f"{run_command(rec.runbook, rec.path, target)} --resume {rec.op}"
    raise RunbookStopped(
        f"{held}; it was not abandoned: nothing changed",
        hint="stop that process first (Ctrl-C at its terminal ends the run where "
        f"`{resume}` continues it), then abandon it"
        + (
            f" (a process on {where} is judged gone only there; at a terminal, abandon asks "
            "whether it is gone)"
            if where
            else ""
        ),
    )
