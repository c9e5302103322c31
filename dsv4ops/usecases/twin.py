"""`twin hazard NAME --state force|off|auto`: one of the twin's hazards switched on the running
twin deployment of the session's target (runbooks/hazard.py), checked and planned here;
the switch itself, journaled as a HAZARD operation under the deploy lock, is usecases/hazard.py's."""

from __future__ import annotations

from dsv4ops.runbooks.hazard import WHAT as WHAT  # what each hazard is, in words (the prompt)
from dsv4ops.runbooks.hazard import PlannedHazard, check_twin, plan_hazard
from dsv4ops.usecases.session import TargetSession


def twin_target(name: str | None) -> str:
    """The target's name, checked to be a twin (NotATwinError otherwise) before anything is
    opened or sent."""
    from dsv4ops.profiles import get_target

    target = get_target(name)
    check_twin(target.name, target.launcher)
    return target.name


def plan_twin_hazard(session: TargetSession, hazard: str, state: str) -> PlannedHazard:
    """What the switch would send, and where (`--dry-run`); the session's journal says where the
    twin runs. Raises DsOpsError when nothing is deployed."""
    name = session.target.name
    return plan_hazard(session.journal, target=name, hazard=hazard, state=state)
