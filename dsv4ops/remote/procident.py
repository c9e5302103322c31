"""Who a process is, beyond its pid: its start time and the boot it runs in (Linux /proc).

A pid is reused after its process exits; a deploy lock that named only a pid would look alive
when an unrelated process got the same number after a crash. The lock records the holder's
start time (field 22 of /proc/PID/stat, clock ticks since boot) and the boot id, and a holder
counts as alive only while a process with that pid, start time and boot exists. The target-side
agent (stdlib-only, `remote/agent/lock.py`) applies the same rule on the target, where it can
see the holder's process; this module is the operator side of it.
"""

from __future__ import annotations

import os

from dsv4ops.whoami import local_host


def start_ticks(pid: int) -> int | None:
    """Start time of a live process in clock ticks since boot; None (gone, zombie, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the name in (...) may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def identity(pid: int) -> dict[str, object]:
    """What the lock records next to the pid (values None where /proc cannot tell)."""
    return {"pid_start": start_ticks(pid), "boot_id": boot_id()}


def same_process(pid: int, recorded: dict[str, object]) -> bool | None:
    """Is `pid` still the process `recorded` (an identity()) describes? None: cannot tell."""
    want_start, want_boot = recorded.get("pid_start"), recorded.get("boot_id")
    if isinstance(want_boot, str) and boot_id() not in (None, want_boot):
        return False  # rebooted since: every pid of that boot is gone
    if not isinstance(want_start, int):
        return None
    now = start_ticks(pid)
    if now is None:
        return False if os.path.isdir("/proc") else None
    return now == want_start


def dead_here(holder: dict[str, object]) -> bool:
    """A lock holder recorded on *this* machine whose process is gone (or whose pid now
    belongs to another process). False for another machine's holder: that is the target's call."""
    pid = holder.get("pid")
    if holder.get("host") != local_host() or not isinstance(pid, int):
        return False
    return not _pid_alive(pid) or same_process(pid, holder) is False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
