"""The execution seam: everything that touches the target goes through an Executor.

Two implementations: `remote.local.LocalExecutor` (subprocess) and `remote.ssh.SSHExecutor`
(fabric). Code above this seam is identical for both. Commands are argv lists, never shell
strings: implementations that need a shell (SSH) quote every element with `shlex.quote`, so a
profile value containing `;`, `$(...)` or spaces stays one argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

# Secret handling lives in dsv4ops.secrets (one definition for executors, journal and printers);
# re-exported here because the executors' callers know it from this module.
from dsv4ops.secrets import (
    SECRET_ARG_FLAGS,
    SECRET_ENV_MARKERS,
    is_secret_key,
    redact_argv,
    redact_env,
)


@dataclass(frozen=True)
class CommandResult:
    """Outcome of one command on the target."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    host: str = "localhost"
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def describe(self, max_chars: int = 2000) -> str:
        """Command, exit code and both streams, for error messages."""
        out = self.stdout[-max_chars:].rstrip()
        err = self.stderr[-max_chars:].rstrip()
        lines = [
            f"command: {' '.join(self.argv)}",
            f"host: {self.host}",
            f"exit code: {'timeout' if self.timed_out else self.exit_code}",
        ]
        if out:
            lines.append(f"stdout:\n{out}")
        if err:
            lines.append(f"stderr:\n{err}")
        return "\n".join(lines)


@runtime_checkable
class Executor(Protocol):
    """Runs argv on a target and moves files to and from it.

    `run` raises `RemoteCommandError` (holding the `CommandResult`) on a non-zero exit when
    `check` is true, and `TargetError` when the target cannot be reached at all. `env` adds to
    the target's environment for that one command; its values never appear in exceptions or logs
    (`secret_env_keys` names keys whose values are redacted everywhere).
    """

    host: str

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> CommandResult: ...

    def put(self, local: Path, remote: str) -> None: ...

    def get(self, remote: str, local: Path) -> None: ...

    def close(self) -> None: ...


__all__ = [
    "SECRET_ARG_FLAGS",
    "SECRET_ENV_MARKERS",
    "CommandResult",
    "Executor",
    "ProcessSpec",
    "ProcessState",
    "is_secret_key",
    "redact_argv",
    "redact_env",
]


@dataclass(frozen=True)
class ProcessSpec:
    """One long-running component to start detached on the target."""

    name: str  # "prefill" | "decode" | "router"
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = ()  # every port it binds; stop verifies all are closed


@dataclass(frozen=True)
class ProcessState:
    """What the target says about one component."""

    name: str
    pid: int | None
    alive: bool
    started_at: str | None = None
    argv: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = None  # as recorded at start, secrets redacted
    ports_open: Mapping[int, bool] = field(default_factory=dict)
    log_path: str | None = None
    exit_code: int | None = None
