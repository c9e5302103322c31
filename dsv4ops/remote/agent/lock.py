"""The deploy lock (`<workdir>/deploy.lock`): atomic take, release by its operation, staleness."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time

from .common import AgentError, JsonObject, Workdir, now_iso, read_json
from .procfs import pid_alive, proc_stat


def _lock_view(wd: Workdir, dead_pids: list[object]) -> JsonObject | None:
    holder = read_json(wd.lock())
    if holder is None:
        return None
    same_host = holder.get("host") == socket.gethostname()
    stale = (same_host and _holder_gone(holder)) or holder.get("pid") in (dead_pids or [])
    return {"holder": holder, "stale": bool(stale)}


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _holder_gone(holder: JsonObject) -> bool:
    """The lock holder's process no longer exists: its pid is dead, or now belongs to another
    process (start time, field 22 of /proc/PID/stat, or the boot differs from what the holder
    recorded; dsv4ops/remote/procident.py is the CLI side of this rule)."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return True
    boot = holder.get("boot_id")
    if isinstance(boot, str) and _boot_id() not in (None, boot):
        return True
    start = holder.get("pid_start")
    if isinstance(start, int) and os.path.isdir("/proc"):
        stat = proc_stat(pid)
        return stat is None or stat[2] != start
    return False


def op_lock_acquire(wd: Workdir, req: JsonObject) -> JsonObject:
    holder = dict(req.get("holder") or {})
    holder.setdefault("started_at", now_iso())
    if not holder.get("op_id"):
        raise AgentError("bad_request", "lock holder needs an op_id")
    path = wd.lock()
    broken = None
    if req.get("force"):
        view = _lock_view(wd, req.get("dead_pids") or [])
        if view:
            broken = view["holder"]
            os.replace(path, f"{path}.broken-{int(time.time())}")  # kept for forensics
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:  # a full disk fails here: the finally removes the stub
            json.dump(holder, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # atomic: fails if it exists, and readers never see a half-written lock
    except FileExistsError:
        view = _lock_view(wd, req.get("dead_pids") or [])
        raise AgentError(
            "lock_held", "deploy lock is held", **(view or {"holder": {}, "stale": False})
        ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    return {"acquired": True, "holder": holder, "broke": broken}


def op_lock_release(wd: Workdir, req: JsonObject) -> JsonObject:
    view = _lock_view(wd, [])
    if view is None:
        return {"released": False}
    if view["holder"].get("op_id") != req.get("op_id"):
        raise AgentError("lock_held", "deploy lock is held by another operation", **view)
    os.remove(wd.lock())
    return {"released": True}


def op_lock_info(wd: Workdir, req: JsonObject) -> JsonObject | None:
    return _lock_view(wd, req.get("dead_pids") or [])
