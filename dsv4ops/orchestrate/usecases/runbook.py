"""`dsv4ops runbook run`: a parsed runbook run against a target's session, journaled.

The engine (`dsv4ops.runbooks.run`) gets the session's journal, its commands run as child
`dsv4ops` commands (`runbooks/execute.py`), and its world is the target as `dsv4ops status`
sees it (`status.py`: the same report for a step's `requires: healthy`) over the remote seam.
A dry run gets no session: nothing on the target is read or touched."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsv4ops.orchestrate.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.runbooks.model import Runbook
    from dsv4ops.runbooks.session import Ran
    from dsv4ops.runbooks.world import TargetWorld


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
    report: Callable[[dict[str, Any]], None] | None = None,
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


def _world(session: TargetSession) -> TargetWorld:
    """The engine's view of the target: status's report for preconditions, the remote seam."""
    from dsv4ops.orchestrate.usecases.status import status_reader
    from dsv4ops.runbooks.world import TargetWorld

    # what `dsv4ops status` reports, as it composes it
    status = status_reader(session, session.journal)
    return TargetWorld(
        session.supervisor, session.journal, target=session.target.name, status=status
    )
