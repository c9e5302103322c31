"""`twin hazard NAME --state force|off|auto`: one of the twin's hazards switched on the running
twin deployment of the session's target (runbooks/hazard.py), journaled as a HAZARD operation."""

from __future__ import annotations

from typing import Any

from dsv4ops.orchestrate.usecases.session import TargetSession
from dsv4ops.runbooks.hazard import WHAT as WHAT  # what each hazard is, in words (the prompt)
from dsv4ops.runbooks.hazard import check_twin, plan_hazard, set_hazard


def twin_target(name: str | None) -> str:
    """The target's name, checked to be a twin (NotATwinError otherwise) before anything is
    opened or sent."""
    from dsv4ops.profiles import get_target

    target = get_target(name)
    check_twin(target.name, target.launcher)
    return target.name


def plan_twin_hazard(session: TargetSession, hazard: str, state: str) -> dict[str, Any]:
    """What the switch would send, and where (`--dry-run`); the session's journal says where the
    twin runs. Raises DsOpsError when nothing is deployed."""
    name = session.target.name
    return plan_hazard(session.journal, target=name, hazard=hazard, state=state)


def switch_twin_hazard(
    session: TargetSession, hazard: str, state: str, *, reason: str | None = None
) -> dict[str, Any]:
    """Send the switch through the session's supervisor, journaled (who, why, how it ended)."""
    return set_hazard(
        session.supervisor,
        session.journal,
        target=session.target.name,
        hazard=hazard,
        state=state,
        reason=reason,
    )
