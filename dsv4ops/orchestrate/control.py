"""The narrow surface the orchestrator needs from a target (satisfied by remote.Supervisor).

Everything process- or network-level on the target goes through this: the engine, status and
the probe are the same code for the local and SSH executors, because the Supervisor runs the
target-side agent through either. Unit tests substitute a scripted fake with the same methods.
The protocol is typed on the Supervisor's own result types (`dsv4ops/remote/results.py`, next to
the agent protocol they decode), so mypy checks that the real `Supervisor` and the test doubles
satisfy it, and the engine reads the results' fields instead of probing for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from dsv4ops.remote.base import ProcessSpec, ProcessState
from dsv4ops.remote.results import HttpReply, HttpRequest, LockInfo, PreflightReport, StopReport
from dsv4ops.timings import TARGET_HTTP_S


class TargetControl(Protocol):
    """What the Supervisor offers (see dsv4ops/remote/supervisor.py for the behaviour)."""

    workdir: str

    def start(self, spec: ProcessSpec) -> ProcessState: ...

    def stop(self, name: str, ports: Sequence[int] | None = None, *, grace_s: float) -> StopReport:
        """Raises a DeployError (StopError) when a process of the group or a port survives."""
        ...

    def kill(self, name: str, signal: str = "KILL", group: bool = False) -> bool:
        """Send a signal (to the process group when `group`); False when nothing was running.

        The drain uses it to SIGTERM the router without waiting (its graceful shutdown)."""
        ...

    def status(
        self, names: Iterable[str], ports: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, ProcessState]: ...

    def log_tail(self, name: str, lines: int = 50) -> str: ...

    def wait_http(
        self,
        url: str,
        *,
        timeout_s: float,
        expect: int | Sequence[int] | None = 200,
        proc_name: str | None = None,
    ) -> float:
        """Seconds waited; raises a DeployError (ComponentNotReadyError) with the log tail."""
        ...

    def http(
        self,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = TARGET_HTTP_S,
    ) -> HttpReply:
        """One request made from the target; no HTTP answer at all is a reply with status None."""
        ...

    def http_many(
        self, requests: Sequence[str | HttpRequest], *, timeout_s: float = TARGET_HTTP_S
    ) -> list[HttpReply]:
        """Several requests made from the target at once (one round trip); replies in order."""
        ...

    def preflight(
        self, ports: Iterable[int], gpus: Iterable[int], paths: Iterable[str] = ()
    ) -> PreflightReport: ...

    def lock_acquire(self, holder: Mapping[str, object], force: bool = False) -> LockInfo | None:
        """The broken lock's info when `force` broke one; raises a DeployLockError (a
        LockHeldError with .holder and .stale) when held."""
        ...

    def lock_release(self, op_id: str) -> bool: ...

    def lock_info(self) -> LockInfo | None: ...
