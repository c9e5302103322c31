"""Typed results of Supervisor calls, plus the deploy-lock holder identity."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Required, TypedDict

from dsv4ops.clock import utc_now_iso
from dsv4ops.jsontypes import JSONValue
from dsv4ops.remote.base import redact_argv
from dsv4ops.remote.procident import boot_id, start_ticks
from dsv4ops.whoami import local_host, local_user


class HttpRequest(TypedDict, total=False):
    """One request of an `http_many` call, as the agent reads it (a plain dict on the wire):
    a url, and optionally the method, body, headers, timeout and a cap on the bytes read."""

    url: Required[str]
    method: str
    body: str | None
    headers: Mapping[str, str]
    timeout_s: float
    max_bytes: int


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
    # The polling itself, on the target's clock: when the last unsuccessful poll started (None
    # when the first one succeeded) and when the successful one started. Their difference is
    # the detection granularity, independent of transport and of the server's answer time.
    last_miss_at_monotonic: float | None = None
    hit_started_at_monotonic: float | None = None
    first_poll_at_monotonic: float | None = None

    @property
    def poll_gap_s(self) -> float | None:
        """Seconds between the start of the last miss and the start of the hit."""
        if self.last_miss_at_monotonic is None or self.hit_started_at_monotonic is None:
            return None
        return self.hit_started_at_monotonic - self.last_miss_at_monotonic

    @property
    def mean_poll_interval_s(self) -> float | None:
        """Average time from one poll's start to the next one's over the whole wait."""
        if self.attempts < 2 or self.first_poll_at_monotonic is None:
            return None
        if self.hit_started_at_monotonic is None:
            return None
        return (self.hit_started_at_monotonic - self.first_poll_at_monotonic) / (self.attempts - 1)


@dataclass(frozen=True)
class HttpReply:
    status: int | None  # None: no HTTP answer at all (see `error`)
    body: str
    error: str | None
    elapsed_s: float
    # No answer in time (decided by the exception's type where the request was made), as
    # opposed to a refused or broken connection: watch judges the two differently.
    timed_out: bool = False
    # The body was longer than the request's `max_bytes`: the read stopped there and `body` is
    # empty (a prefix of Prometheus text would read as wrong numbers, not as too much).
    oversized: bool = False


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
    holder: Mapping[str, JSONValue]
    stale: bool


class LockHolder(TypedDict):
    """Who holds the deploy lock, as lock_holder writes it (procident.identity's keys beside
    the pid)."""

    pid: int
    pid_start: int | None
    boot_id: str | None
    host: str
    user: str
    command: str
    started_at: str
    op_id: str


def lock_holder(command: str, op_id: str | None = None) -> LockHolder:
    """Identity of this process for the deploy lock (the agent judges staleness by it).

    pid, with the boot id and start ticks beside it (the pid alone could be reused after a
    crash; with them it names one process), host, user, the command (secrets redacted),
    started_at and the operation id the lock is taken for.
    """
    return {
        "pid": os.getpid(),
        "pid_start": start_ticks(os.getpid()),
        "boot_id": boot_id(),
        "host": local_host(),
        "user": local_user(),
        "command": " ".join(redact_argv(command.split())),
        "started_at": utc_now_iso(),
        "op_id": op_id or uuid.uuid4().hex[:12],
    }
