"""What the agent reads from /proc and the socket table: process identity, groups, listeners."""

from __future__ import annotations

import contextlib
import os
import socket

from dsv4ops.secrets import redact_text

from .common import JsonObject


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, starttime) of a live process, or None (gone or zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    state, pgid, starttime = fields[0], int(fields[2]), int(fields[19])
    if state in ("Z", "X"):
        return None
    return state, pgid, starttime


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    if os.path.isdir("/proc"):
        return proc_stat(pid) is not None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st is not None and st[1] == pgid:
                pids.append(int(entry))
    return pids


def group_is_ours(rec: JsonObject) -> bool:
    """Does the recorded process group still belong to the component we started?

    The kernel never hands out a pid that is still some group's pgid, so if the leader's pid is
    alive with a different start time, our group is gone and that pid belongs to a stranger.
    """
    pgid = rec.get("pgid")
    if not pgid:
        return False
    leader = proc_stat(pgid)
    return leader is None or rec.get("starttime") is None or leader[2] == rec["starttime"]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, int(port))) == 0


def listeners() -> dict[int, set[str]]:
    """port -> socket inodes of LISTEN sockets (IPv4 and IPv6), from /proc/net."""
    out: dict[int, set[str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A":
                out.setdefault(int(parts[1].rsplit(":", 1)[1], 16), set()).add(parts[9])
    return out


def pids_by_inode(inodes: set[str]) -> list[int]:
    wanted = {f"socket:[{i}]" for i in inodes}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") in wanted:
                        found.append(int(entry))
                        break
    return sorted(found)


def tail(path: str, lines: int) -> str:
    """The last `lines` lines of a log, secrets hidden (SGLang logs its ServerArgs, api keys
    included, and a component's argv): every log tail leaves the target scrubbed."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return redact_text("\n".join(data.splitlines()[-lines:])) if lines > 0 else ""
