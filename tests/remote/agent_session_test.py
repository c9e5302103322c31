"""A local target's agent session (dsv4ops/remote/agent_session.py): one process answers the
calls, and every rule of a one-shot call still holds (timeout, interrupt, a changed zip, a crash,
the caller's environment, exited monitors)."""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest

from dsv4ops.remote import AgentCallError, ProcessSpec, Supervisor
from dsv4ops.remote.agent_session import AgentSession
from dsv4ops.remote.agent_zip import agent_zip
from dsv4ops.remote.local import LocalExecutor
from testing.ports import free_ports

pytestmark = pytest.mark.slow


def _pid(sup: Supervisor) -> int:
    return int(sup.call("hello")["pid"])


def _gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return False


def _closed_port_wait(sup: Supervisor, port: int, *, call_timeout: float) -> None:
    """An agent call that runs until its own timeout: a wait on a port nothing listens on."""
    sup.call("wait_http", timeout=call_timeout, url=f"http://127.0.0.1:{port}/", timeout_s=30)


def test_calls_share_one_agent_process_until_closed(local_sup: Supervisor) -> None:
    first = _pid(local_sup)
    assert first != os.getpid()
    assert [_pid(local_sup) for _ in range(5)] == [first] * 5
    local_sup.close()
    assert _wait_gone(first)  # EOF on its stdin ends it
    assert _pid(local_sup) != first  # the next call starts another


def test_a_wrapped_executor_keeps_one_process_per_call(workdir: Path) -> None:
    class Counting(LocalExecutor):
        runs = 0

        def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            Counting.runs += 1
            return super().run(*args, **kwargs)

    sup = Supervisor(Counting(), str(workdir), python=sys.executable)
    pids = {_pid(sup) for _ in range(3)}
    assert len(pids) == 3 and Counting.runs >= 3  # (+ the first upload's mkdir and install)


def test_a_timed_out_call_kills_the_session_and_the_next_call_starts_another(
    local_sup: Supervisor,
) -> None:
    before = _pid(local_sup)
    (port,) = free_ports(1)
    t0 = time.monotonic()
    with pytest.raises(AgentCallError, match="timed out") as caught:
        _closed_port_wait(local_sup, port, call_timeout=0.5)
    assert caught.value.kind == "transport" and time.monotonic() - t0 < 10
    assert _wait_gone(before)
    assert _pid(local_sup) != before


def _when_waiting_for_the_reply(monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]) -> None:
    """Run `act` once the session has the request and the caller waits for its reply: the moment
    a Ctrl-C or a crash lands in a long call (a timer could fire before the request is written
    on a loaded machine)."""
    real = AgentSession._read_line

    def read_line(self: AgentSession, deadline: float) -> bytes | None:
        monkeypatch.setattr(AgentSession, "_read_line", real)
        act()
        return real(self, deadline)

    monkeypatch.setattr(AgentSession, "_read_line", read_line)


def test_an_interrupted_call_leaves_no_agent_behind(
    local_sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _pid(local_sup)
    (port,) = free_ports(1)

    def interrupt(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    # a real signal, 0.3 s into the wait for the reply
    _when_waiting_for_the_reply(monkeypatch, lambda: signal.setitimer(signal.ITIMER_REAL, 0.3))
    try:
        with pytest.raises(KeyboardInterrupt):
            _closed_port_wait(local_sup, port, call_timeout=20)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert _wait_gone(before)  # not left running its wait as an orphan
    assert _pid(local_sup) != before


def test_a_session_killed_during_a_call_is_a_transport_error_never_a_retry(
    local_sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _pid(local_sup)
    (port,) = free_ports(1)
    _when_waiting_for_the_reply(monkeypatch, lambda: os.kill(before, signal.SIGKILL))
    t0 = time.monotonic()
    with pytest.raises(AgentCallError, match="no reply") as caught:
        _closed_port_wait(local_sup, port, call_timeout=20)
    assert caught.value.kind == "transport"
    assert time.monotonic() - t0 < 10  # reported at once, not after a one-shot retry's wait
    assert _pid(local_sup) != before


def test_a_zip_damaged_on_disk_is_replaced_before_the_next_call_runs(
    local_sup: Supervisor, workdir: Path
) -> None:
    before = _pid(local_sup)
    zip_path = workdir / ".dsv4ops" / "agent.zip"
    zip_path.write_bytes(b"not a zip")
    after = _pid(local_sup)  # the session says stale; the one-shot path uploads and retries
    assert after != before and _wait_gone(before)
    assert zip_path.read_bytes() == agent_zip()


def test_a_changed_environment_reaches_the_next_component(
    local_sup: Supervisor, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = workdir.parent / "seen"

    def seen_by_a_component(name: str) -> str:
        script = f'echo "$DSV4OPS_SESSION_PROBE" > {out}'
        local_sup.start(ProcessSpec(name, ("/bin/sh", "-c", script), {}, ()))
        deadline = time.monotonic() + 10
        while not (out.exists() and out.read_text().endswith("\n")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        text = out.read_text().strip()
        out.unlink()
        return text

    monkeypatch.setenv("DSV4OPS_SESSION_PROBE", "one")
    assert seen_by_a_component("probe1") == "one"
    monkeypatch.setenv("DSV4OPS_SESSION_PROBE", "two")  # as a one-shot agent would inherit it
    assert seen_by_a_component("probe2") == "two"


def test_exited_monitors_are_reaped_by_the_session(local_sup: Supervisor, workdir: Path) -> None:
    local_sup.start(ProcessSpec("brief", ("/bin/true",), {}, ()))
    record = json.loads((workdir / "run" / "brief.json").read_text())
    deadline = time.monotonic() + 10
    while not (workdir / "run" / "brief.exit.json").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.1)  # the monitor exits just after writing the exit record
    local_sup.status(["brief"])  # a request, then the reaping
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{record['monitor_pid']}"):  # reaped, not a zombie
        assert time.monotonic() < deadline, "the exited monitor stays a zombie of the session"
        time.sleep(0.02)


def test_a_session_that_spoke_between_calls_is_replaced_before_the_next_call(
    local_sup: Supervisor,
) -> None:
    """Garbage on a session's stdin between calls: the agent answers it (a line no call asked
    for), and the next call goes to a new session instead of reading that line as its reply."""
    before = _pid(local_sup)
    session = local_sup._session
    assert session is not None and session._proc is not None
    assert session._proc.stdin is not None and session._proc.stdout is not None
    session._proc.stdin.write(b"garbage\n")
    session._proc.stdin.flush()
    readable, _, _ = select.select([session._proc.stdout], [], [], 10)
    assert readable, "the agent did not answer the garbage"
    assert local_sup.lock_release("op-nobody") is False  # its own reply, not the garbage's
    assert _wait_gone(before) and _pid(local_sup) != before
