"""Components as detached process groups: start (with a monitor that records the exit), status,
stop (the server's own graceful shutdown first, then the group), kill, log tail."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

from dsv4ops.secrets import redact_argv, redact_env

from .common import (
    AgentError,
    JsonObject,
    Workdir,
    check_name,
    check_seconds,
    now_iso,
    read_json,
    write_json_atomic,
)
from .procfs import (
    group_is_ours,
    group_members,
    listeners,
    pid_alive,
    pids_by_inode,
    port_open,
    proc_stat,
    tail,
)


def _monitor(
    wd: Workdir, name: str, argv: list[str], env: dict[str, str], log_path: str, wfd: int
) -> None:
    """Runs in a forked child in its own session: spawn the component, report its pid, reap it.

    The component gets its own session and process group (so stop can signal the group and the
    SSH session ending does not touch it); the monitor stays its parent so it is reaped (no
    zombie that looks alive) and its exit code is recorded.
    """
    import subprocess

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # never hold the SSH channel / caller's pipes open
        os.dup2(devnull, fd)
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=wd.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:
        os.write(wfd, json.dumps({"error": f"cannot execute {argv[0]!r}: {exc}"}).encode())
        os.close(wfd)
        os._exit(0)
    st = proc_stat(proc.pid)
    os.write(wfd, json.dumps({"pid": proc.pid, "starttime": st[2] if st else None}).encode())
    os.close(wfd)
    code = proc.wait()
    with contextlib.suppress(OSError):
        write_json_atomic(
            wd.exit(name), {"pid": proc.pid, "exit_code": code, "exited_at": now_iso()}
        )
    os._exit(0)


def op_start(wd: Workdir, req: JsonObject) -> JsonObject:
    name = check_name(req.get("name"))
    argv = [str(a) for a in req.get("argv") or []]
    if not argv:
        raise AgentError("bad_request", "start needs a non-empty argv")
    spec_env = {str(k): str(v) for k, v in (req.get("env") or {}).items()}
    ports = [int(p) for p in req.get("ports") or []]
    old = read_json(wd.run(name))
    if old and pid_alive(old.get("pid")):
        raise AgentError(
            "already_running", f"{name} is already running (pid {old['pid']})", pid=old["pid"]
        )
    log_path = wd.log(name)
    if os.path.exists(log_path):
        os.replace(log_path, log_path + ".1")
    with contextlib.suppress(FileNotFoundError):
        os.remove(wd.exit(name))
    env = dict(os.environ)
    env.update(spec_env)
    # Over SSH the command wrapper SIGTERMs this agent when the channel goes away (timeout or
    # drop). Dying between spawning the component and writing its run record would leave a
    # running component nobody knows about, so SIGTERM/SIGHUP wait until the record exists
    # (the wrapper's SIGKILL comes 2 s later, far more than this takes).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
    try:
        return _spawn_and_record(wd, name, argv, env, spec_env, ports, log_path, mask)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _spawn_and_record(
    wd: Workdir,
    name: str,
    argv: list[str],
    env: dict[str, str],
    spec_env: dict[str, str],
    ports: list[int],
    log_path: str,
    mask: set[int | signal.Signals],
) -> JsonObject:
    rfd, wfd = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked monitor
        try:
            # the monitor and the component must get SIGTERM from `stop` as usual
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(rfd)
            os.setsid()
            _monitor(wd, name, argv, env, log_path, wfd)
        finally:
            os._exit(1)
    os.close(wfd)
    with os.fdopen(rfd) as r:
        raw = r.read()
    info = json.loads(raw or '{"error": "monitor died before reporting"}')
    if "error" in info:
        raise AgentError("exec_failed", f"{name}: {info['error']}")
    record = {
        "name": name,
        "pid": info["pid"],
        "pgid": info["pid"],
        "starttime": info["starttime"],
        "argv": redact_argv(argv),
        "env": redact_env(spec_env),
        "ports": ports,
        "started_at": now_iso(),
        "log_path": log_path,
        "monitor_pid": child,
    }
    write_json_atomic(wd.run(name), record)
    return record


def await_exit_record(wd: Workdir, name: str, pid: int | None, within_s: float = 1.0) -> None:
    """The monitor writes the exit record just after reaping; give it a moment when we saw death first."""
    deadline = time.monotonic() + within_s
    while pid and time.monotonic() < deadline:
        ex = read_json(wd.exit(name)) or {}
        if ex.get("pid") == pid:
            return
        time.sleep(0.01)


def state_of(wd: Workdir, name: str, ports: list[int] | None = None) -> JsonObject:
    rec = read_json(wd.run(name)) or {}
    pid = rec.get("pid")
    alive = pid_alive(pid)
    if alive and pid and rec.get("starttime") is not None:
        st = proc_stat(pid)  # same pid number but a different process: ours is gone
        alive = bool(st and st[2] == rec["starttime"])
    ex = read_json(wd.exit(name)) or {}
    want = ports if ports is not None else rec.get("ports") or []
    return {
        "name": name,
        "pid": pid,
        "pgid": rec.get("pgid"),
        "alive": alive,
        "started_at": rec.get("started_at"),
        "argv": rec.get("argv"),
        "env": rec.get("env"),
        "ports": rec.get("ports") or [],
        "ports_open": {str(p): port_open(p) for p in want},
        "log_path": rec.get("log_path") or wd.log(name),
        "exit_code": ex.get("exit_code") if ex.get("pid") == pid and pid else None,
        "recorded": bool(rec),
    }


def op_status(wd: Workdir, req: JsonObject) -> JsonObject:
    ports = req.get("ports") or {}
    return {n: state_of(wd, check_name(n), ports.get(n)) for n in req.get("names") or []}


def _wait_gone(pgid: int, deadline: float) -> list[int]:
    while True:
        left = group_members(pgid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def _wait_pid_gone(pid: int, deadline: float) -> bool:
    while proc_stat(pid) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _terminate(
    rec: JsonObject, pgid: int, members: list[int], grace: float, signals: list[str]
) -> list[int]:
    """SIGTERM the server process only, give its own graceful shutdown `grace` seconds, then
    SIGKILL what is left of the group.

    SGLang's TokenizerManager (the server process) handles SIGTERM: it drains, sends its
    schedulers ShutdownReq and waits up to 15 s for them to release the GPUs before it kills
    them; the schedulers install no SIGTERM handler, so a SIGTERM to the whole group would
    kill them at once and skip that path. A group whose leader is already gone gets SIGTERM.
    """
    main = rec.get("pid")
    main_pid = main if isinstance(main, int) and main in members else None  # alive, in the group
    signals.append("SIGTERM")
    deadline = time.monotonic() + grace
    with contextlib.suppress(ProcessLookupError):
        if main_pid is not None:
            os.kill(main_pid, signal.SIGTERM)
        else:
            os.killpg(pgid, signal.SIGTERM)
    if main_pid is not None and _wait_pid_gone(main_pid, deadline):
        # the server exited by itself; what it left behind gets a moment to follow it
        members = _wait_gone(pgid, min(deadline, time.monotonic() + 1.0))
    else:
        members = _wait_gone(pgid, deadline)
    if members:
        signals.append("SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        members = _wait_gone(pgid, time.monotonic() + 5.0)
    return members


def op_stop(wd: Workdir, req: JsonObject) -> JsonObject:
    name = check_name(req.get("name"))
    grace = check_seconds(req, "grace_s")
    rec = read_json(wd.run(name)) or {}
    asked = req.get("ports")
    ports = [int(p) for p in (asked if asked is not None else rec.get("ports") or [])]
    pgid = rec.get("pgid")
    t0 = time.monotonic()
    signals: list[str] = []
    members: list[int] = []
    if isinstance(pgid, int) and group_is_ours(rec):
        members = group_members(pgid)
        if members:
            members = _terminate(rec, pgid, members, grace, signals)
            if not members:
                await_exit_record(wd, name, rec.get("pid"))
    # A listener can outlive the group by a few ms while the kernel tears the socket down.
    deadline = time.monotonic() + 1.0
    open_ports = [p for p in ports if port_open(p)]
    while open_ports and time.monotonic() < deadline:
        time.sleep(0.02)
        open_ports = [p for p in open_ports if port_open(p)]
    held = {}
    if open_ports:
        lst = listeners()
        held = {str(p): pids_by_inode(lst.get(p, set())) for p in open_ports}
    return {
        "name": name,
        "pid": rec.get("pid"),
        "pgid": pgid,
        "was_running": bool(signals),
        "signals": signals,
        "left": members,
        "ports_open": open_ports,
        "port_holders": held,
        "elapsed_s": round(time.monotonic() - t0, 4),
    }


def op_kill(wd: Workdir, req: JsonObject) -> JsonObject:
    name = check_name(req.get("name"))
    rec = read_json(wd.run(name)) or {}
    sig = getattr(signal, "SIG" + str(req.get("signal", "KILL")).upper().removeprefix("SIG"))
    if not state_of(wd, name, [])["alive"]:
        return {"name": name, "killed": False}
    with contextlib.suppress(ProcessLookupError):
        if req.get("group", False):
            os.killpg(rec["pgid"], sig)
        else:
            os.kill(rec["pid"], sig)
    return {"name": name, "killed": True, "pid": rec["pid"]}


def op_log_tail(wd: Workdir, req: JsonObject) -> JsonObject:
    name = check_name(req.get("name"))
    return {"name": name, "text": tail(wd.log(name), int(req.get("lines", 50)))}
