"""What a dropped SSH connection does to the supervisor: a readiness wait rides it out (or, with
no budget for that, a clear error), and nothing is lost on the box."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.clock import SystemClock
from dsv4ops.errors import TargetError
from dsv4ops.remote import ProcessSpec, Supervisor
from testing.ports import free_ports
from testing.remote import SshdServer, toy_argv, wait_for_log_line

pytestmark = [pytest.mark.ssh, pytest.mark.slow]
CLOCK = SystemClock()


def _agents_running(agent_path: str, workdir: Path) -> list[int]:
    """Agent processes still running, not counting the component's monitor (a fork of one)."""
    monitor = json.loads((workdir / "run" / "web.json").read_text())["monitor_pid"]
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if agent_path in (proc / "cmdline").read_text() and int(proc.name) != monitor:
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def _within(seconds: float, seen: Callable[[], bool]) -> bool:
    """Whether `seen` holds within `seconds` (polled every 50 ms)."""
    deadline = CLOCK.monotonic() + seconds
    while not seen():
        if CLOCK.monotonic() >= deadline:
            return False
        CLOCK.sleep(0.05)
    return True


def test_drop_during_wait_without_a_budget_is_a_target_error_and_the_component_survives(
    sshd: SshdServer, workdir: Path
) -> None:
    ex = sshd.executor()
    sup = Supervisor(ex, str(workdir), python=sys.executable, reconnect_s=0)
    (port,) = free_ports(1)
    ready = workdir.parent / "ready"
    # answers 503 until `ready` exists: the wait stays in flight until the test says otherwise
    started = sup.start(
        ProcessSpec("web", toy_argv("--port", port, "--ready-file", ready), {}, (port,))
    )
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=30, proc_name="web")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    worker = threading.Thread(target=wait)
    worker.start()
    try:
        wait_for_log_line(workdir, "web", "toy: first poll")  # evidence the wait is in flight
        assert sshd.drop_connections() >= 1
    finally:
        worker.join(timeout=20)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], TargetError), errors
    assert "connection dropped" in str(errors[0])
    # the orphaned agent notices its caller is gone and stops polling
    assert _within(10.0, lambda: not _agents_running(sup.agent_path, workdir))
    # a new call reconnects; the detached component never noticed the drop
    state = sup.status(["web"])["web"]
    assert state.alive and state.pid == started.pid
    ready.touch()
    assert sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web") < 20
    assert not sup.stop("web", grace_s=5).forced
    ex.close()


def test_a_wait_rides_out_a_drop_and_answers_when_the_component_is_ready(
    sshd: SshdServer, workdir: Path
) -> None:
    ex = sshd.executor()
    heard: list[str] = []
    sup = Supervisor(ex, str(workdir), python=sys.executable, notify=heard.append)
    (port,) = free_ports(1)
    ready = workdir.parent / "ready"
    started = sup.start(
        ProcessSpec("web", toy_argv("--port", port, "--ready-file", ready), {}, (port,))
    )
    waited: list[float] = []
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            waited.append(sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=30, proc_name="web"))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    worker = threading.Thread(target=wait)
    worker.start()
    try:
        wait_for_log_line(workdir, "web", "toy: first poll")
        first = set(_agents_running(sup.agent_path, workdir))
        assert first and sshd.drop_connections() >= 1
        t_drop = CLOCK.monotonic()
        # the first agent notices its caller is gone and stops; the wait goes on in a new one
        # (a new SSH session and a new agent's interpreter: seconds on loaded cores, where a
        # 5 s bound once ran out; the wait's own 30 s deadline is the real limit)
        assert _within(10.0, lambda: not first & set(_agents_running(sup.agent_path, workdir)))
        assert _within(
            20.0, lambda: bool(set(_agents_running(sup.agent_path, workdir)) - first)
        ), "no wait was sent again"
        assert worker.is_alive() and not errors, errors
        ready.touch()
    finally:
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert not errors, errors
    # what it waited counts from the first sending, the outage included
    assert waited and waited[0] >= CLOCK.monotonic() - t_drop - 1
    assert any("connection lost" in h for h in heard), heard
    assert heard[-1].startswith(f"{ex.host}: connection is back after"), heard
    state = sup.status(["web"])["web"]
    assert state.alive and state.pid == started.pid
    assert not sup.stop("web", grace_s=5).forced
    ex.close()
