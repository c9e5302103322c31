"""`dsv4ops runbook list|show|run|abandon`: the runbooks under runbooks/ read (their list, one's
checklist), a parsed runbook run against a target's session, journaled, and a stopped run
closed.

The engine (`dsv4ops.runbooks.run`) gets the session's journal, its commands run as child
`dsv4ops` commands (`runbooks/execute.py`), and its world is the target as `dsv4ops status`
sees it (`status.py`: the same report for a step's `requires: healthy`) over the remote seam.
A dry run gets no session: nothing on the target is read or touched."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, TypedDict

from dsv4ops.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.runbooks.abandon import Abandoned
    from dsv4ops.runbooks.model import Runbook as Runbook  # re-exported: the CLI annotates it
    from dsv4ops.runbooks.session import Ran
    from dsv4ops.runbooks.world import TargetWorld


def load_book(ref: str, verbs: Collection[str]) -> Runbook:
    """The runbook NAME under runbooks/ (or a .md path), its commands checked against `verbs`.
    Raises RunbookError for an unknown runbook or a bad file."""
    from dsv4ops.runbooks.parse import load_runbook

    return load_runbook(ref, verbs=verbs)


class RunbookRow(TypedDict):
    """One runbook in `runbook list` (its --json rows); `error`: why the file is no runbook
    (None for a good one, whose other fields are then empty)."""

    name: str
    title: str
    symptom: str
    steps: int
    rehearsal: bool
    error: str | None


def runbook_rows(verbs: Collection[str]) -> list[RunbookRow]:
    """`runbook list`: every runbook's name, title, symptom, step count and whether it has a
    rehearsal. A file that is no runbook (unreadable, empty, a broken link, a directory) is a
    row saying why, so one bad file does not hide the others."""
    from dsv4ops.runbooks.catalogue import list_runbooks
    from dsv4ops.runbooks.model import RunbookError

    rows: list[RunbookRow] = []
    for p in list_runbooks():
        try:
            b = load_book(str(p), verbs)
        except RunbookError as exc:
            rows.append(
                {
                    "name": p.stem,
                    "title": "",
                    "symptom": "",
                    "steps": 0,
                    "rehearsal": False,
                    "error": str(exc),
                }
            )
            continue
        rows.append(
            {
                "name": b.name,
                "title": b.title,
                "symptom": b.summary,
                "steps": len(b.steps),
                "rehearsal": bool(b.rehearse),
                "error": None,
            }
        )
    return rows


def checklist_lines(book: Runbook) -> list[str]:
    """`runbook show`: the readable checklist (each step, what it does, which ones ask)."""
    from dsv4ops.runbooks.checklist import checklist

    return checklist(book)


def run_target(target: str | None, *, rehearse: bool) -> tuple[str, bool]:
    """The target a run goes to (default: the default target) and whether targets.yaml knows
    it; a rehearsal's target must be a twin (RunbookError otherwise)."""
    from dsv4ops.profiles import DEFAULT_TARGET, load_targets
    from dsv4ops.runbooks import run as R

    name = target or DEFAULT_TARGET
    launchers = {n: t.launcher for n, t in load_targets().items()}
    if rehearse:
        R.check_rehearsal_target(name, launchers)
    return name, name in launchers


def run_runbook(
    runbook: Runbook,
    target: str,
    session: TargetSession | None,
    *,
    echo: Callable[[str], None],
    confirm: Callable[[str], bool],
    pause: Callable[[str], None],
    variables: Mapping[str, str],
    yes: bool,
    dry_run: bool,
    rehearse: bool,
    start: int | None,
    resume: str | None,
    interactive: bool,
    reason: str | None = None,
    report: Callable[[dict[str, object]], None] | None = None,
) -> list[Ran]:
    """Run the runbook; what ran. Raises RunbookFailed (2), RunbookStopped or RunbookError (1);
    KeyboardInterrupt propagates after the engine said what ran and how to resume.

    With `report` (`--json`), the steps' own output goes to stderr and `report` gets the run's
    one result object however the run ends (the engine's `result_json`), before any error
    propagates."""
    import functools

    from dsv4ops import exitcodes
    from dsv4ops.errors import DsOpsError
    from dsv4ops.runbooks import run as R
    from dsv4ops.runbooks.execute import execute

    run_session = R.Session(
        runbook=runbook,
        target=target,
        execute=functools.partial(execute, stdout_to_stderr=report is not None),
        echo=echo,
        confirm=confirm,
        pause=pause,
        variables=variables,
        yes=yes,
        dry_run=dry_run,
        rehearse=rehearse,
        start=start,
        resume=resume,
        world=_world(session) if session else None,
        journal=session.journal if session else None,
        interactive=interactive,
        reason=reason,
    )
    if report is None:
        return R.run(run_session)
    try:
        ran = R.run(run_session)
    except DsOpsError as exc:
        report(R.result_json(run_session, exit_code=exc.exit_code, error=str(exc), hint=exc.hint))
        raise
    except KeyboardInterrupt:
        report(R.result_json(run_session, exit_code=exitcodes.INTERRUPTED, error="interrupted"))
        raise
    report(R.result_json(run_session, exit_code=exitcodes.OK))
    return ran


def abandon_run(
    session: TargetSession,
    run_id: str,
    *,
    reason: str | None,
    confirm: Callable[[str], bool],
    interactive: bool,
    yes: bool,
    dry_run: bool,
) -> Abandoned:
    """`runbook abandon`: close a stopped run of the session's target ABANDONED, changing
    nothing on the target (runbooks/abandon.py says when it is refused)."""
    from dsv4ops.runbooks.abandon import abandon
    from dsv4ops.whoami import operator_identity

    return abandon(
        session.journal,
        run_id,
        target=session.target.name,
        who=operator_identity(),
        reason=reason,
        confirm=confirm,
        interactive=interactive,
        yes=yes,
        dry_run=dry_run,
    )


def _world(session: TargetSession) -> TargetWorld:
    """The engine's view of the target: status's report for preconditions, the remote seam."""
    from dsv4ops.runbooks.world import TargetWorld
    from dsv4ops.usecases.status import status_reader

    # what `dsv4ops status` reports, as it composes it
    status = status_reader(session, session.journal)
    return TargetWorld(
        session.supervisor, session.journal, target=session.target.name, status=status
    )
