"""A stack that answers on the unit's ports although no journal record started it (issue 20).

`status` checks the processes the journal recorded; with nothing recorded running, a stack
someone started by hand (or another tool) is still there. Positive evidence only: its ports
accept, so it is not DOWN, and nothing shows what it runs, so it is not HEALTHY either:
UNMANAGED (exit 4, UNDECIDED). The ports looked at are those of the deployment the journal last
recorded (the profile actually deployed there, running or since stopped), and the ones a deploy
of PROBE_PROFILE would use on the target only when the journal records no deployment at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.orchestrate.status_report import UnmanagedRow
from dsv4ops.remote.base import ProcessState

PROBE_PROFILE = "baseline"
UNMANAGED = "UNMANAGED"


def ports_to_check(
    deployed: Deployment | None, render_now: Callable[[str], Deployment] | None
) -> dict[str, Sequence[int]] | None:
    """The given deployment's ports (the running one, else the last recorded: status_recorded's
    `last`); with none, those PROBE_PROFILE renders to."""
    if deployed is None and render_now is not None:
        try:
            deployed = render_now(PROBE_PROFILE)
        except DsOpsError:
            return None  # the working copy cannot say which ports: nothing to look at
    return {c.name: tuple(c.ports) for c in deployed.components} if deployed else None


def unmanaged(
    recorded: bool, states: Mapping[str, ProcessState], last: Deployment | None = None
) -> UnmanagedRow | None:
    """{"ports", "why"} when nothing is recorded running and some component's port accepts
    anyway (`last`: the deployment the journal last recorded, whose ports were checked)."""
    if recorded:
        return None
    open_ports = sorted(
        p for s in states.values() if not s.alive for p, up in (s.ports_open or {}).items() if up
    )
    if not open_ports:
        return None
    where = ", ".join(f":{p}" for p in open_ports)
    if last is None:
        return {"ports": open_ports, "why": f"answers on {where}, no deploy in the journal"}
    return {
        "ports": open_ports,
        "why": f"answers on {where} (the ports of {last.profile_name}, deployed last), "
        "and the journal records nothing running",
    }
