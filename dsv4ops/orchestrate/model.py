"""What the orchestrator adds to the one `Deployment` value (dsv4ops/deployment.py): a
component's ProcessSpec for the supervisor. (A recorded deployment is `Operation.deployment()`.)
"""

from __future__ import annotations

from dsv4ops.apikey import read_key, with_key
from dsv4ops.deployment import Component
from dsv4ops.remote.base import ProcessSpec


def process_spec(component: Component) -> ProcessSpec:
    """What the supervisor starts for this component: exact argv/env and every port it binds.
    A router whose key is a reference gets the key read now, on this machine, in place of the
    '***' its rendered argv holds (ApiKeyError when it cannot be read)."""
    ports = component.ports or (component.port,)
    argv = component.argv
    if component.api_key is not None:
        argv = with_key(argv, read_key(component.api_key))
    return ProcessSpec(name=component.name, argv=argv, env=dict(component.env), ports=tuple(ports))
