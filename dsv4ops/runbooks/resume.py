"""Where a run starts: from the top (or --from), or, with --resume RUN_ID, where the journal
says the run stopped, once the recorded preconditions have been checked again.

None of the tools that inspired this (Ansible, SSM Automation, Rundeck) re-checks the world
before resuming a step; a PD incident needs it: the pair may have been restarted, or be healthy
again, since the run stopped. A change of health or of what is deployed refuses the resume (a
person at a terminal may go on anyway); a step that was in flight, failed or was cut short and
is not safe to repeat needs a fresh confirmation.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsv4ops.journal.commands import command
from dsv4ops.runbooks.model import RunbookError, Step
from dsv4ops.runbooks.preconditions import changes
from dsv4ops.runbooks.runlog import RunLog, RunRecord, held_by, load
from dsv4ops.runbooks.session import (
    RunbookStopped,
    Session,
    resolve_all,
    run_command,
    selected_steps,
)


@dataclass
class Plan:
    first: Step | None
    values: dict[str, str]
    log: RunLog | None
    rehearse: bool


def plan(s: Session) -> Plan:
    """Check everything that can be checked before the first step. Raises RunbookError or
    RunbookStopped."""
    if s.resume is not None:  # `--resume ""` is a resume without an id, never a fresh run
        return _resume(s)
    values = {**(s.variables or {}), "target": s.target}
    steps = selected_steps(s.runbook, s.start)
    resolve_all(s, steps, values)
    log = None
    if s.journal is not None and not s.dry_run:
        log = RunLog(s.journal)
        log.begin(
            s.runbook.name,
            s.runbook.path,
            s.target,
            dict(s.variables or {}),
            digest=s.runbook.digest,
            step_digests=s.runbook.step_digests(),
            reason=s.reason,
        )
    return Plan(steps[0] if steps else None, values, log, s.rehearse)


def _resume(s: Session) -> Plan:
    assert s.resume is not None
    if not s.resume.strip():
        raise RunbookError(
            "--resume takes a run id; it was given an empty one",
            hint=f"{command('journal', s.target)} lists the runs (kind runbook) and their ids",
        )
    # the flags first: a --dry-run has no journal, and that is not what is wrong with it
    if s.dry_run or s.start is not None or s.rehearse:
        raise RunbookError(
            "--resume continues a run as recorded: no --from, --rehearse or --dry-run"
        )
    if s.journal is None:
        raise RunbookError("--resume needs the target's journal")
    rec = load(s.journal, s.resume)
    _check_same_run(s, rec)
    over = _check_held(s, rec)
    _check_unchanged(s, rec)
    values = {**rec.variables, **(s.variables or {}), "target": s.target}
    at = rec.resume_at
    first = (
        None if at == "end" else s.runbook.step(at) if isinstance(at, int) else s.runbook.steps[0]
    )
    steps = selected_steps(s.runbook, first.number) if first else []
    resolve_all(s, steps, values)
    s.echo(
        f"resuming run {rec.op} of {rec.runbook} on {rec.target} at "
        + (f"step {first.number}" if first else "its end (every step had run)")
    )
    if first is not None:
        _check_preconditions(s, rec)
        _check_repeat(s, rec, first)
    log = RunLog(s.journal)
    # RunbookStopped when another operator's resume claimed it first
    log.reopen(rec, s.who(), s.reason, over=over)
    return Plan(first, values, log, rehearse=False)


def _check_same_run(s: Session, rec: RunRecord) -> None:
    if rec.status.terminal:
        raise RunbookError(
            f"run {rec.op} ended {rec.status.value}; there is nothing to resume",
            hint=f"start a new run: `{run_command(s)}`",
        )
    if rec.runbook != s.runbook.name:
        raise RunbookError(f"run {rec.op} is a run of {rec.runbook!r}, not {s.runbook.name!r}")
    if rec.target != s.target:
        raise RunbookError(f"run {rec.op} ran against {rec.target!r}, not {s.target!r}")


def _check_held(s: Session, rec: RunRecord) -> str | None:
    """Refuse a run some live process holds (RunbookStopped). A holder on another machine
    cannot be judged from here: a person at a terminal may say it is gone and take the run over
    (the key returned goes into the claim); a script may not."""
    holder = held_by(rec)
    if holder is None or rec.holder is None:
        return None
    held, where = holder
    question = f"{held}, which cannot be checked from here: is it gone? take the run over?"
    if where and s.interactive and s.confirm(question):
        return rec.holder.key
    raise RunbookStopped(
        f"{held}; this resume did not start: nothing ran",
        hint=f"follow it with {command('journal', s.target)}; resume only once it has stopped"
        + (
            f" (a process on {where} is judged gone only there; at a terminal, a resume asks "
            "whether it is gone and may take the run over)"
            if where
            else ""
        ),
    )


def _check_unchanged(s: Session, rec: RunRecord) -> None:
    """The runbook must be the one the run began with: a step edited since (status became stop)
    would otherwise run unannounced. Refused, naming the steps that changed."""
    if not rec.digest:
        s.echo(f"note: run {rec.op} predates runbook hashes; its runbook is not compared")
        return
    if rec.digest == s.runbook.digest:
        return
    now = s.runbook.step_digests()
    was = rec.step_digests
    lines = [f"step {n} changed" for n in sorted(set(now) & set(was), key=int) if now[n] != was[n]]
    lines += [f"step {n} added" for n in sorted(set(now) - set(was), key=int)]
    lines += [f"step {n} removed" for n in sorted(set(was) - set(now), key=int)]
    if not lines and was:
        s.echo(f"note: {s.runbook.path} changed since run {rec.op} began, outside its steps")
        return
    what = "; ".join(lines) or "its steps were not recorded"
    raise RunbookError(
        f"not resuming run {rec.op}: {s.runbook.path} changed since the run began ({what}; "
        f"sha256 {rec.digest[:12]} then, {s.runbook.digest[:12]} now). Nothing ran.",
        hint="restore the runbook as it was (git), or start a new run of the edited one "
        f"(`{run_command(s)} --from N`)",
    )


def _check_preconditions(s: Session, rec: RunRecord) -> None:
    if s.world is None:
        return
    blocking, info = changes(rec.preconditions(), s.world.snapshot())
    if not blocking and not info:
        s.echo("preconditions: unchanged since the run stopped")
    for line in info:
        s.echo(f"preconditions (for information): {line}")
    if not blocking:
        return
    s.echo("preconditions CHANGED since the run stopped:")
    for line in blocking:
        s.echo(f"  {line}")
    if s.interactive and s.confirm("the target changed since this run stopped: resume anyway?"):
        return
    raise RunbookStopped(
        f"not resuming run {rec.op}: the target changed since it stopped ("
        + "; ".join(blocking)
        + "). Nothing ran.",
        hint=f"look with `dsv4ops status --target {s.target}`, then start a new run "
        f"(`{run_command(s)}`)",
    )


def _check_repeat(s: Session, rec: RunRecord, first: Step) -> None:
    """A step that may already have done part of its work runs again only when safe, or with a
    fresh confirmation."""
    cut_short = first.number == rec.in_flight or (
        first.number in rec.done and rec.done[first.number].get("outcome") != "ok"
    )
    if not cut_short or first.safe_to_repeat:
        return
    question = f"step {first.number} may have run in part and is not safe to repeat: run it again?"
    s.echo(f"step {first.number} ({first.title}) is not safe to repeat")
    if s.yes or (s.interactive and s.confirm(question)):
        return
    raise RunbookStopped(
        f"not resuming run {rec.op}: step {first.number} is not safe to repeat and was not "
        "confirmed again. Nothing ran.",
        hint=f"check what it did with {command('journal', s.target)}, then resume at a terminal "
        "(or --yes)",
    )
