"""`dsv4ops runbook run`: a parsed runbook run against a target's session, journaled.

The engine (`dsv4ops.runbooks.run`) gets the session's journal, its commands run as child
`dsv4ops` commands (`runbooks/execute.py`), and its world is the target as `dsv4ops status`
sees it (`status.py`: the same report for a step's `requires: healthy`) over the remote seam.
A dry run gets no session: nothing on the target is read or touched."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

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
) -> list[Ran]:
    """Run the runbook; what ran. Raises RunbookFailed (2), RunbookStopped or RunbookError (1);
    KeyboardInterrupt propagates after the engine said what ran and how to resume."""
    from dsv4ops.runbooks import run as R
    from dsv4ops.runbooks.execute import execute

    return R.run(
        R.Session(
            runbook=runbook,
            target=target,
            execute=execute,
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
        )
    )


def _world(session: TargetSession) -> TargetWorld:
    """The engine's view of the target: status's report for preconditions, the remote seam."""
    from dsv4ops.orchestrate.usecases.status import status_reader
    from dsv4ops.runbooks.world import TargetWorld

    # what `dsv4ops status` reports, as it composes it
    status = status_reader(session, session.journal)
    return TargetWorld(session.supervisor, session.journal, target=session.target.name,
                       status=status)
