"""Errors raised by the supervisor, each a DsOpsError subclass carrying the facts as fields."""

from __future__ import annotations

from collections.abc import Mapping

from dsv4ops.errors import DeployError, LockHeldError, RemoteCommandError


class AgentCallError(RemoteCommandError):
    """The target-side agent refused or failed an operation. `kind` is the agent's error kind."""

    def __init__(
        self, message: str, *, kind: str, reply: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(message, result=reply)
        self.kind = kind
        self.reply = dict(reply or {})


class ComponentNotReadyError(DeployError):
    """A readiness wait failed: `reason` is "timeout" or "died"; `log_tail` is the component's log."""

    def __init__(
        self,
        message: str,
        *,
        url: str,
        reason: str,
        elapsed_s: float,
        name: str | None,
        log_tail: str,
        exit_code: int | None,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason
        self.elapsed_s = elapsed_s
        self.name = name
        self.log_tail = log_tail
        self.exit_code = exit_code


class StopError(DeployError):
    """A stop left processes of the group alive or a port open (`left` pids, `ports_open`)."""

    def __init__(self, message: str, *, name: str, left: list[int], ports_open: list[int]) -> None:
        super().__init__(message)
        self.name = name
        self.left = left
        self.ports_open = ports_open


class DeployLockError(LockHeldError):
    """The deploy lock is held; `holder` is its identity, `stale` says its holder is dead."""

    def __init__(
        self, message: str, *, holder: Mapping[str, object], stale: bool, hint: str | None
    ) -> None:
        super().__init__(message, hint=hint)
        self.holder = dict(holder)
        self.stale = stale
