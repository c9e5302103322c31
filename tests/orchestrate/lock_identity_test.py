"""The deploy lock names one process, not just a pid: a holder whose pid now belongs to another
process (reused after a crash) is stale. Through the real target agent (local executor)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from dsv4ops.remote import LocalExecutor, Supervisor
from dsv4ops.remote.procident import start_ticks
from dsv4ops.remote.results import lock_holder


def _supervisor(tmp_path: Path) -> Supervisor:
    return Supervisor(LocalExecutor(), str(tmp_path / "work"), python=sys.executable)


def test_the_holder_records_its_process_start_time() -> None:
    holder = lock_holder("dsv4ops deploy baseline", "d-x")
    with open(f"/proc/{os.getpid()}/stat") as f:
        field22 = int(f.read().rsplit(")", 1)[1].split()[19])
    assert holder["pid"] == os.getpid() and holder["pid_start"] == field22
    assert holder["boot_id"]


def test_a_live_holder_is_not_stale(tmp_path: Path) -> None:
    sup = _supervisor(tmp_path)
    sup.lock_acquire(lock_holder("test", "d-live"))
    info = sup.lock_info()
    assert info is not None and not info.stale
    assert sup._call("lock_info")["stale"] is False  # the agent's own judgement


def test_a_holder_whose_pid_was_reused_is_stale(tmp_path: Path) -> None:
    sup = _supervisor(tmp_path)
    # This process stands in for the unrelated process that got the crashed holder's pid: same
    # pid, same host, but not the start time the holder recorded.
    ticks = start_ticks(os.getpid())
    assert ticks is not None  # Linux: /proc gives this process's start time
    holder = {**lock_holder("test", "d-crashed"), "pid_start": ticks - 1}
    assert holder["host"] == socket.gethostname()
    sup.lock_acquire(holder)
    assert sup._call("lock_info")["stale"] is True  # the agent (on the target) sees it
    info = sup.lock_info()
    assert info is not None and info.stale


def test_a_holder_from_another_boot_is_stale(tmp_path: Path) -> None:
    sup = _supervisor(tmp_path)
    sup.lock_acquire({**lock_holder("test", "d-old-boot"), "boot_id": "not-this-boot"})
    info = sup.lock_info()
    assert info is not None and info.stale
