"""What the orchestrator deploys: the one `Deployment` value (dsv4ops/deployment.py), and the
two adapters it needs on top of it: a component's ProcessSpec for the supervisor, and the
Deployment a journal operation recorded.
"""

from __future__ import annotations

# `Deployment` (re-exported) and `ComponentSpec`: deprecated aliases, removed after the
# issue-12 merge.
from dsv4ops.deployment import START_ORDER, STOP_ORDER, WORKERS, Component, Deployment
from dsv4ops.journal.records import Operation
from dsv4ops.remote.base import ProcessSpec

# Import Component and Deployment from dsv4ops.deployment; rebuild a recorded deployment with
# Operation.deployment().
ComponentSpec = Component  # deprecated alias, removed after the issue-12 merge

__all__ = [
    "START_ORDER",
    "STOP_ORDER",
    "WORKERS",
    "Component",
    "ComponentSpec",
    "Deployment",
    "deployment_from_record",
    "process_spec",
]


def process_spec(component: Component) -> ProcessSpec:
    """What the supervisor starts for this component: exact argv/env and every port it binds."""
    ports = component.ports or (component.port,)
    return ProcessSpec(
        name=component.name, argv=component.argv, env=dict(component.env), ports=tuple(ports)
    )


def deployment_from_record(op: Operation) -> Deployment:
    """Deprecated alias of `op.deployment()`, removed after the issue-12 merge."""
    return op.deployment()
