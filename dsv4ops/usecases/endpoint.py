"""Endpoint targets (a cluster, `transport: endpoint`): the verbs that would start or stop a
process refuse them, naming the command that does it on the cluster; `status` reads the router.

The cluster's controller (RBG) owns restarts, rollouts and rollbacks: dsv4ops has no SSH there
and no process of its own, so `deploy`, `rollback`, `stop` and `kernels deploy|rollback|verify|
list` refuse (ControllerOwnedError, exit 1, nothing changed) instead of pretending, and so does
`ab`, whose blocks are deploys (its refusal says to roll each arm out with its export). What
works unchanged is everything that only talks HTTP: `canary`, `status` (read-only) and `watch`
(built on `session.reachable`).
"""

from __future__ import annotations

from dsv4ops.errors import ControllerOwnedError
from dsv4ops.orchestrate.status_report import EndpointReport
from dsv4ops.profiles.model import Target
from dsv4ops.usecases.session import TargetSession, reachable

DOCS = "docs/kubernetes.md: what stays the same and what the cluster takes over"


def export_line(target: Target, profile: str | None, *extra: str) -> str:
    """`dsv4ops export rbg PROFILE ... | kubectl apply -f -` for this endpoint target, with its
    `replicas` and `namespace` (an export without the cluster's --replicas would rescale it)."""
    e = target.endpoint
    args = ["dsv4ops", "export", "rbg", profile or _profile_of(target), *extra]
    if e is not None and e.replicas is not None:
        args += ["--replicas", str(e.replicas)]
    if e is not None and e.namespace:
        args += ["--namespace", e.namespace]
    return " ".join(args) + " | kubectl apply -f -"


def refuse_on_endpoint(target: Target, verb: str, profile: str | None = None) -> None:
    """Raise ControllerOwnedError when `target` is an endpoint; return otherwise."""
    if target.endpoint is None:
        return
    why, command = _how(target, verb, profile)
    raise ControllerOwnedError(
        f"{verb}: target {target.name!r} is an endpoint (transport: endpoint); the cluster's "
        f"controller owns restarts, and nothing was changed.\n  {why}\n    {command}",
        hint=DOCS,
    )


def _how(target: Target, verb: str, profile: str | None) -> tuple[str, str]:
    """(what to do instead, the command) for `verb` on the cluster."""
    if verb == "deploy":
        return (
            f"to roll {profile or 'the profile'} out on the cluster, apply its export:",
            export_line(target, profile),
        )
    if verb == "rollback":
        return (
            "to go back, apply the export of the known-good revision (profiles/ checked out "
            "at that commit):",
            export_line(target, profile),
        )
    if verb == "stop":
        return "to stop the deployment, delete the RoleBasedGroup:", _delete_line(target)
    if verb.startswith("kernels"):
        return (
            "kernel packages reach the pods as an init-container image: pin "
            "`kernel_package` in the profile and apply its export:",
            export_line(target, profile, "--kernel-image", "IMAGE"),
        )
    if verb == "ab":
        return (
            "an A/B switches the deployment between blocks, and restarts are the cluster's: "
            "run `dsv4ops ab` against a box, or roll each arm out with its export and canary "
            "it by name (`dsv4ops canary --target " + target.name + "`):",
            export_line(target, profile),
        )
    return "changes reach the cluster as an applied export:", export_line(target, profile)


def endpoint_status(session: TargetSession) -> EndpointReport:
    """Read-only status of an endpoint target: the router's liveness, readiness and the workers
    as the router lists them (`/workers`). Healthy only on a 200 from /readiness."""
    from dsv4ops.orchestrate.status import router_info

    reach = reachable(session, key=False)  # status sends no key: what it reads answers anyone
    router = router_info(session.supervisor, reach.router_url)
    return {
        "target": session.target.name,
        "transport": "endpoint",
        "router_url": reach.router_url,
        "healthy": bool(router["healthy"]),
        "router": router,
        "metrics_urls": list(reach.metrics_urls),
        "restarts": "owned by the cluster's controller: " + export_line(session.target, None),
    }


def _profile_of(target: Target) -> str:
    e = target.endpoint
    return e.profile if e is not None and e.profile else "PROFILE"


def _delete_line(target: Target) -> str:
    from dsv4ops.errors import DsOpsError
    from dsv4ops.export.rbg import group_name

    e = target.endpoint
    try:
        group = group_name(e.profile, None) if e is not None and e.profile else "GROUP"
    except DsOpsError:  # a profile name that is no DNS-1123 label: it was exported with --name
        group = "GROUP"
    ns = f" -n {e.namespace}" if e is not None and e.namespace else ""
    return f"kubectl delete rolebasedgroup {group}{ns}"
