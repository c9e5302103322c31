"""Typed results of Supervisor calls, plus the deploy-lock holder identity."""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsv4ops.clock import utc_now_iso
from dsv4ops.remote.base import redact_argv


@dataclass(frozen=True)
class StopReport:
    name: str
    pid: int | None
    was_running: bool
    signals: tuple[str, ...]  # () | ("SIGTERM",) | ("SIGTERM", "SIGKILL")
    elapsed_s: float

    @property
    def forced(self) -> bool:
        return "SIGKILL" in self.signals


@dataclass(frozen=True)
class WaitResult:
    elapsed_s: float  # seconds from the first poll to the expected answer, measured on the target
    status: int
    attempts: int
    detected_at_monotonic: float  # the target's CLOCK_MONOTONIC at detection (benchmarks)


@dataclass(frozen=True)
class HttpReply:
    status: int | None  # None: no HTTP answer at all (see `error`)
    body: str
    error: str | None
    elapsed_s: float


@dataclass(frozen=True)
class PortUse:
    in_use: bool
    holders: tuple[tuple[int, str | None], ...] = ()  # (pid, our component name or None)

    @property
    def ours(self) -> bool:
        """In use only by processes of components we started."""
        return self.in_use and bool(self.holders) and all(n for _, n in self.holders)


@dataclass(frozen=True)
class PreflightReport:
    host: str
    workdir: str
    writable: bool
    writable_error: str | None
    ports: Mapping[int, PortUse]
    gpus_available: bool  # False when the target has no (working) nvidia-smi; see gpu_note
    gpu_note: str | None
    gpus_busy: Mapping[int, tuple[int, ...]]  # gpu index -> pids using it
    gpus_missing: tuple[int, ...]
    paths: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class LockInfo:
    holder: Mapping[str, Any]
    stale: bool


def lock_holder(command: str, op_id: str | None = None) -> dict[str, Any]:
    """Identity of this process for the deploy lock: pid, host, user, command, started_at, op_id."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "user": _user(),
        "command": " ".join(redact_argv(command.split())),
        "started_at": utc_now_iso(),
        "op_id": op_id or uuid.uuid4().hex[:12],
    }


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return str(os.getuid())
