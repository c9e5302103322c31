"""The one factory that turns plain target values into an Executor (cli/_context.py calls it)."""

from __future__ import annotations

from dsv4ops.errors import TargetError
from dsv4ops.remote.base import Executor


def connect(
    transport: str,
    *,
    host: str = "localhost",
    port: int = 22,
    user: str | None = None,
    key: str | None = None,
    known_hosts: str | None = None,
    trust_on_first_use: bool = False,
    connect_timeout_s: float = 10.0,
    python: str = "python3",
) -> Executor:
    """Executor for `transport` "local" or "ssh"; raises TargetError for anything else.

    SSH connects lazily (on the first command), so a bad host fails at first use with a
    TargetError naming user@host:port.
    """
    if transport == "local":
        from dsv4ops.remote.local import LocalExecutor

        return LocalExecutor()
    if transport == "ssh":
        from dsv4ops.remote.ssh import SSHExecutor  # fabric/paramiko only when SSH is used

        return SSHExecutor(
            host=host,
            port=port,
            user=user,
            key=key,
            known_hosts=known_hosts,
            trust_on_first_use=trust_on_first_use,
            connect_timeout_s=connect_timeout_s,
            python=python,
        )
    raise TargetError(f"unknown transport {transport!r} (expected 'local' or 'ssh')")
