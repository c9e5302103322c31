"""Run a parsed runbook: steps in order (or as their branches say), each journaled.

The command executor, the world (preconditions, waits, diagnostics), the journal, the prompts
and the output are injected, so order, branches, expectations, confirmations, resume and Ctrl-C
are tested without processes (and through the real CLI on the twin). A run is a journal
operation of its own (runlog.py); every dsv4ops command a step runs journals itself and names
the run ($DSV4OPS_RUNBOOK_RUN). Ctrl-C anywhere, a prompt included, ends with what ran and the
command that resumes the run.
"""

from __future__ import annotations

from dsv4ops.errors import DsOpsError
from dsv4ops.runbooks import resume as R
from dsv4ops.runbooks import steps as S
from dsv4ops.runbooks.session import (
    TARGET_ENV,
    Execute,
    Progress,
    Ran,
    RunbookFailed,
    RunbookStopped,
    Session,
    World,
    before,
    check_rehearsal_target,
    command_env,
    resolve_all,
    resume_command,
    resume_hint,
    selected_steps,
)

# The names callers import from here (cli/runbook.py, the tests): the session and its errors
# live in session.py, which steps.py and resume.py import without importing this module.
__all__ = [
    "TARGET_ENV",
    "Execute",
    "Progress",
    "Ran",
    "RunbookFailed",
    "RunbookStopped",
    "Session",
    "World",
    "before",
    "check_rehearsal_target",
    "command_env",
    "resolve_all",
    "resume_command",
    "resume_hint",
    "result_json",
    "run",
    "selected_steps",
]


def run(s: Session) -> list[Ran]:
    """Run the session; return what ran. Raises RunbookFailed (2), RunbookStopped or
    RunbookError (1); KeyboardInterrupt propagates after saying what ran and how to resume."""
    plan = R.plan(s)  # where to start, the values, the journal: checked before anything runs
    p = Progress(plan.log, plan.values)
    s.progress = p
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


def result_json(
    s: Session, *, exit_code: int, error: str | None = None, hint: str | None = None
) -> dict[str, object]:
    """`runbook run --json`'s one object: the run, what ran, how it ended (`exit`, `error`)."""
    p = s.progress
    run_id = p.run_id if p else None
    return {
        "runbook": s.runbook.name,
        "target": s.target,
        "run": run_id,
        "dry_run": s.dry_run,
        "ran": [
            {"where": r.where, "command": r.command, "exit": r.code} for r in (p.ran if p else [])
        ],
        "exit": exit_code,
        "error": error,
        "hint": hint,
        "resume": resume_command(s, run_id) if run_id and exit_code != 0 else None,
    }


def _stopped(s: Session, p: Progress, why: str) -> None:
    """Journal that the run stopped, where `--resume` continues it (never left RUNNING)."""
    if p.log is not None and p.run_id:
        p.log.stop(f"{why[:300]}; resume with `{resume_command(s, p.run_id)}`")
