"""The preconditions a runbook step records before it runs, and what changed since.

A snapshot (world.py takes it before every step) holds what matters to a PD incident: each
component's process and health (the pair's health, the router's readiness), running/queued per
server, and the deployed operation, profile and commit. `--resume` compares the snapshot of the
step it continues with today's: a change of health or of what is deployed refuses the resume
(or asks, interactively); load always moves, so running/queued changes are only reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from dsv4ops.jsontypes import JSONValue


class ComponentSnapshot(TypedDict):
    """One component in a preconditions snapshot: its process alive, its health answered 200,
    and its running and queued requests (None: its /metrics not read)."""

    alive: bool
    healthy: bool
    running: float | None
    queued: float | None


class DeployedSnapshot(TypedDict):
    """What the journal says is deployed: its operation, profile and commit."""

    op: str | None
    profile: str | None
    commit: str | None


class Snapshot(TypedDict, total=False):
    """The preconditions before a step (world.py): whether the unit is healthy, each
    component, what is deployed; or why the target could not be read (`error`)."""

    healthy: bool
    components: dict[str, ComponentSnapshot]
    deployed: DeployedSnapshot
    error: str


WATCHED = ("alive", "healthy")  # per component: a change here refuses a resume
LOAD = ("running", "queued")  # per component: reported, never refusing
DEPLOYED = ("op", "profile", "commit")


def changes(
    old: Mapping[str, JSONValue] | None, new: Mapping[str, JSONValue]
) -> tuple[list[str], list[str]]:
    """(changes that refuse a resume, changes only worth saying) between two snapshots."""
    if not old:
        return [], ["no preconditions were recorded for this step"]
    blocking: list[str] = []
    info: list[str] = []
    was_dep, now_dep = old.get("deployed") or {}, new.get("deployed") or {}
    for key in DEPLOYED:
        if was_dep.get(key) != now_dep.get(key):
            blocking.append(f"deployed {key}: {was_dep.get(key)} -> {now_dep.get(key)}")
    was_c, now_c = old.get("components") or {}, new.get("components") or {}
    for name in sorted(set(was_c) | set(now_c)):
        a, b = was_c.get(name) or {}, now_c.get(name) or {}
        for key in WATCHED:
            if a.get(key) != b.get(key):
                blocking.append(f"{name} {key}: {a.get(key)} -> {b.get(key)}")
        for key in LOAD:
            if a.get(key) != b.get(key):
                info.append(f"{name} {key}: {a.get(key)} -> {b.get(key)}")
    return blocking, info
