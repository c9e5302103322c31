"""Execution seam (local subprocess or SSH) and the process supervisor built on it.

Importing this package does not import fabric/paramiko: `connect("ssh", ...)` loads
`remote.ssh` only when an SSH target is used, so `dsv4ops --help` stays fast.
"""

from __future__ import annotations

from dsv4ops.remote.base import (
    CommandResult,
    Executor,
    ProcessSpec,
    ProcessState,
    is_secret_key,
    redact_argv,
    redact_env,
)
from dsv4ops.remote.connect import connect
from dsv4ops.remote.errors import (
    AgentCallError,
    ComponentNotReadyError,
    DeployLockError,
    StopError,
)
from dsv4ops.remote.local import LocalExecutor
from dsv4ops.remote.results import (
    HttpReply,
    LockInfo,
    PortUse,
    PreflightReport,
    StopReport,
    WaitResult,
    lock_holder,
)
from dsv4ops.remote.supervisor import Supervisor

__all__ = [
    "AgentCallError",
    "CommandResult",
    "ComponentNotReadyError",
    "DeployLockError",
    "Executor",
    "HttpReply",
    "LocalExecutor",
    "LockInfo",
    "PortUse",
    "PreflightReport",
    "ProcessSpec",
    "ProcessState",
    "StopError",
    "StopReport",
    "Supervisor",
    "WaitResult",
    "connect",
    "is_secret_key",
    "lock_holder",
    "redact_argv",
    "redact_env",
]
