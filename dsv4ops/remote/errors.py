"""Errors raised by the supervisor, each a DsOpsError subclass carrying the facts as fields."""

from __future__ import annotations

from collections.abc import Mapping

from dsv4ops.errors import (
    AgentCallError as AgentCallError,  # its home is errors.py (the journal reads it)
)
from dsv4ops.errors import (
    DeployError,
    DiskFullError,
    LockHeldError,
    TargetError,
    is_disk_full,
)


class ComponentNotReadyError(DeployError):
    """A readiness wait failed: `reason` is "timeout" or "died"; `log_tail` is the component's log;
    `component_exit_code` is the dead component's exit status (the CLI's own exit code stays
    DeployError's)."""

    def __init__(
        self,
        message: str,
        *,
        url: str,
        reason: str,
        elapsed_s: float,
        name: str | None,
        log_tail: str,
        component_exit_code: int | None,
        last: str = "",
    ) -> None:
        super().__init__(message)
        self.last = last  # what the URL last answered ("HTTP 503: ...", "connection refused")
        self.url = url
        self.reason = reason
        self.elapsed_s = elapsed_s
        self.name = name
        self.log_tail = log_tail
        self.component_exit_code = component_exit_code


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


def lock_error(host: str, h: Mapping[str, object], stale: bool) -> DeployLockError:
    """The refusal for a held deploy lock, naming its holder (and saying when it is dead)."""
    who = f"{h.get('user', '?')}@{h.get('host', '?')} pid {h.get('pid', '?')}"
    what = f"'{h.get('command', '?')}' (operation {h.get('op_id', '?')}, since {h.get('started_at', '?')})"
    if stale:
        return DeployLockError(
            f"deploy lock on {host} was left by a dead process: {who} running {what}",
            holder=h,
            stale=True,
            hint="its operation did not finish; check `dsv4ops status`, then break the lock explicitly",
        )
    return DeployLockError(
        f"deploy lock on {host} is held by {who} running {what}",
        holder=h,
        stale=False,
        hint="wait for that operation to finish",
    )


def upload_failed(where: str, remote: str, exc: BaseException, *, removed: bool) -> TargetError:
    """The error of a file copy to the target that failed (`removed`: its partial copy was
    deleted): a full disk is a DiskFullError (exit 2), anything else a TargetError."""
    why = getattr(exc, "strerror", None) or str(exc)
    left = "its partial copy was removed" if removed else f"a partial copy may be left at {remote}"
    message = f"{where}: cannot copy a file to {remote}: {why}; {left}, nothing else was changed"
    if is_disk_full(exc):
        return DiskFullError(
            message,
            hint=f"free space on the target's disk (`df -h {remote.rsplit('/', 1)[0] or '/'}` "
            "there), then run the command again",
        )
    return TargetError(message)
