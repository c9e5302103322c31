"""Force, clear or re-arm one of the twin's hazards on a running twin deployment.

The request is the twin's own `POST /_twin/hazard` (docs/twin.md, "Failure modes"), made from
the target side through the remote seam, on the server the hazard lives on: bootstrap
degradation on the prefill (its switch decides every transfer), the wedge and tool-call
corruption on the decode. A real SGLang target has no such switch: refused, saying so.
"""

from __future__ import annotations

import json
from typing import TypedDict

from dsv4ops.errors import DsOpsError
from dsv4ops.exitcodes import FAILED
from dsv4ops.journal.store import Journal
from dsv4ops.remote import Supervisor

HAZARDS = {"degrade": "prefill", "wedge": "decode", "corrupt": "decode"}
STATES = ("force", "off", "auto")
WHAT = {
    "degrade": "bootstrap degradation (silent KV transfer loss; /health stays 200)",
    "wedge": "decode wedge (running > 0, no tokens, /health 503 after its timeout)",
    "corrupt": "tool-call corruption (dropped calls, cross-talk, DSML in content)",
}


class NotATwinError(DsOpsError):
    """The hazard switch exists only on the twin (exit 1)."""


class HazardNotTakenError(DsOpsError):
    """The server did not take the switch: a handled failure, journaled FAILED (exit 2)."""

    exit_code = FAILED


def check_twin(target: str, launcher: str) -> None:
    if launcher != "twin":
        raise NotATwinError(
            f"target {target!r} runs real SGLang (launcher {launcher!r}): twin hazards can be "
            "forced only on a twin target. Nothing was sent.",
            hint="rehearse on the twin, e.g. --target twin-local",
        )


class PlannedHazard(TypedDict):
    """A switch to send (plan_hazard's): which hazard, to which state, on which component, at
    which URL."""

    hazard: str
    state: str
    component: str
    url: str


def plan_hazard(journal: Journal, *, target: str, hazard: str, state: str) -> PlannedHazard:
    """What the switch would send, and where: {"hazard", "state", "component", "url"} (the
    dry run prints it). Raises DsOpsError when nothing is deployed."""
    if hazard not in HAZARDS or state not in STATES:
        raise DsOpsError(f"unknown hazard {hazard!r} or state {state!r}")
    component = HAZARDS[hazard]
    current = journal.deployed()
    if current is None or not current.components:
        raise DsOpsError(
            f"the journal records no running deployment on {target!r}: nothing to switch",
            hint=f"deploy first: `dsv4ops deploy baseline --target {target}`",
        )
    url = current.deployment().component(component).url("/_twin/hazard")
    return {"hazard": hazard, "state": state, "component": component, "url": url}


def send_hazard(supervisor: Supervisor, planned: PlannedHazard) -> dict[str, object]:
    """POST the planned switch (plan_hazard's) to its server; {"hazard", "state", "component",
    "hazards": the twin's states}. Raises HazardNotTakenError when the server does not take it.
    Journaled, under the deploy lock, by usecases/hazard.py."""
    hazard, state, component = planned["hazard"], planned["state"], planned["component"]
    reply = supervisor.http(
        planned["url"],
        method="POST",
        body=json.dumps({"hazard": hazard, "state": state}),
        headers={"Content-Type": "application/json"},
    )
    if reply.status != 200:
        why = reply.body.strip()[:300] if reply.status else reply.error
        raise HazardNotTakenError(
            f"the {component} did not take the switch ({reply.status}): {why}"
        )
    try:
        states = json.loads(reply.body).get("hazards")
    except (json.JSONDecodeError, AttributeError):
        states = None
    return {"hazard": hazard, "state": state, "component": component, "hazards": states}
