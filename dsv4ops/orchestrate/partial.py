"""A partial restart (`deploy P --only C`): what the unit runs afterwards, and why it is never
marked known-good.

The restarted components run P's commands; the others keep running what the journal says the
current deployment started. The journal records that mix (components, and a `scope` naming who
contributed what), so status and drift describe what really runs. Known-good means "this exact
unit served a proven generation", and a unit whose parts were proven at different times, maybe
from different profiles, is not one; the previous known-good records stay what a rollback uses.
"""

from __future__ import annotations

from typing import TypedDict

from dsv4ops import exitcodes
from dsv4ops.deployment import START_ORDER, Deployment
from dsv4ops.errors import DeployError
from dsv4ops.journal.commands import command
from dsv4ops.journal.records import Operation
from dsv4ops.orchestrate.pd import RestartScope


class PartialRestartRefused(DeployError):
    """`--only` with no recorded deployment to keep: refused before anything changed (exit 1)."""

    exit_code = exitcodes.REFUSED


class ScopeRecord(TypedDict):
    """The journal's record of a partial restart (Operation.scope), its keys in the order written."""

    restarted: list[str]
    kept: list[str]
    kept_from: str
    kept_profile: str
    kept_commit: str | None
    profile_hash: str


def unit_after(
    new: Deployment, scope: RestartScope, current: Operation | None, target: str
) -> tuple[Deployment, ScopeRecord | None]:
    """(the deployment that runs once `scope` of `new` is restarted, the journal's scope record).

    A whole-unit restart is just `new` (scope record None). Raises PartialRestartRefused when a
    part is asked for but the journal does not know what the rest of the unit runs.
    """
    if not scope.partial:
        return new, None
    kept_names = [n for n in START_ORDER if n not in scope.components]
    if current is None or not current.components:
        raise PartialRestartRefused(
            f"--only restarts {', '.join(scope.components)} of the unit, but the journal records "
            f"no deployment running on this target, so what {', '.join(kept_names)} would keep "
            "running is unknown. Nothing was changed.",
            hint=f"deploy the whole unit: {command('deploy', target, new.profile_name)} (without --only)",
        )
    kept = current.deployment()
    components = tuple(
        new.component(n) if n in scope.components else kept.component(n) for n in START_ORDER
    )
    record: ScopeRecord = {
        "restarted": list(scope.components),
        "kept": kept_names,
        "kept_from": current.op,
        "kept_profile": kept.profile_name,
        "kept_commit": kept.git_commit,
        "profile_hash": new.commands_hash,
    }
    if all(kept.component(n).to_record() == new.component(n).to_record() for n in kept_names):
        return new, record  # the kept parts already run exactly P's commands
    mixed = Deployment(
        profile_name=new.profile_name,
        components=components,
        profile_path=new.profile_path,
        git_commit=new.git_commit,
        recorded=new.recorded,
        kernel_package=new.kernel_package,
    )
    return mixed, record


def is_mixed(op: Operation) -> bool:
    """True when a partial restart left parts of the unit on other commands than its profile's."""
    scope = op.scope or {}
    return bool(scope) and (op.profile or {}).get("commands_hash") != scope.get("profile_hash")


def describe_mix(op: Operation) -> str:
    """'router runs P @ c; prefill, decode still run baseline @ c2 (from d-...)'."""
    scope, p = op.scope or {}, op.profile or {}
    commit = (p.get("git_commit") or "uncommitted")[:12]
    kept_commit = (scope.get("kept_commit") or "uncommitted")[:12]
    return (
        f"{', '.join(scope.get('restarted') or [])} run {p.get('name')} @ {commit}; "
        f"{', '.join(scope.get('kept') or [])} still run {scope.get('kept_profile')} @ "
        f"{kept_commit} (from {scope.get('kept_from')})"
    )
