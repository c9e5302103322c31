"""What the orchestrator adds to the one `Deployment` value (dsv4ops/deployment.py): a
component's ProcessSpec for the supervisor. (A recorded deployment is `Operation.deployment()`.)
"""

from __future__ import annotations

from dsv4ops.deployment import Component
from dsv4ops.remote.base import ProcessSpec


def process_spec(component: Component) -> ProcessSpec:
    """What the supervisor starts for this component: exact argv/env and every port it binds."""
    ports = component.ports or (component.port,)
    return ProcessSpec(
        name=component.name, argv=component.argv, env=dict(component.env), ports=tuple(ports)
    )
