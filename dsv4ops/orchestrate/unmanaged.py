"""A stack that answers on the unit's ports although no journal record started it (issue 20).

`status` checks the processes the journal recorded; with nothing recorded, a stack someone
started by hand (or another tool) is still there. Positive evidence only: its ports accept, so
it is not DOWN, and nothing shows what it runs, so it is not HEALTHY either: UNMANAGED (exit 4,
UNDECIDED). The ports looked at are the ones a deploy of PROBE_PROFILE would use on the target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.remote.base import ProcessState

PROBE_PROFILE = "baseline"
UNMANAGED = "UNMANAGED"


def ports_to_check(
    deployed: Deployment | None, render_now: Callable[[str], Deployment] | None
) -> dict[str, Sequence[int]] | None:
    """The recorded deployment's ports; with none recorded, those PROBE_PROFILE renders to."""
    if deployed is None and render_now is not None:
        try:
            deployed = render_now(PROBE_PROFILE)
        except DsOpsError:
            return None  # the working copy cannot say which ports: nothing to look at
    return {c.name: tuple(c.ports) for c in deployed.components} if deployed else None


def unmanaged(recorded: bool, states: Mapping[str, ProcessState]) -> JSONObject | None:
    """{"ports", "why"} when nothing is recorded and some component's port accepts anyway."""
    if recorded:
        return None
    open_ports = sorted(
        p for s in states.values() if not s.alive for p, up in (s.ports_open or {}).items() if up
    )
    if not open_ports:
        return None
    where = ", ".join(f":{p}" for p in open_ports)
    return {"ports": open_ports, "why": f"answers on {where}, no deploy in the journal"}
