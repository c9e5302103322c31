"""dsv4ops target-side agent: one stdlib-only script, run as `python3 agent.py` on the target.

It reads one JSON request on stdin ({"op": ..., "workdir": ..., ...}) and writes one JSON reply
on stdout ({"ok": true, "result": ...} or {"ok": false, "kind": ..., "error": ..., ...}). The
supervisor uploads it to `<workdir>/.dsv4ops/agent.py`; it must run with a plain python3 and no
dsv4ops installed, so it imports nothing outside the standard library. It is one file (longer
than the usual 300 lines) because uploading and versioning one file is the point.

Layout under the work directory: logs/<name>.log (previous one rotated to .1), run/<name>.json
(pid, pgid, argv, redacted env, started_at, ports), run/<name>.exit.json (written by the
monitor when the component exits), state/<name>.json, deploy.lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sys
import time

# A stdlib-only copy of dsv4ops/secrets.py: this script runs on the box without dsv4ops
# installed. tests/remote/agent_test.py checks both classify the same keys and flags.
SECRET_ENV_MARKERS = (
    "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY", "PRIVATE_KEY", "ACCESS_KEY",
)
SECRET_ENV_SUFFIXES = ("TOKEN", "_KEY", "_PASS", "_PW", "_AUTH")
SECRET_ARG_FLAGS = frozenset(
    {"--api-key", "--admin-api-key", "--control-plane-api-keys", "--hf-token",
     "--oracle-password", "--ssl-keyfile-password"}
)
SECRET_FLAG_SUFFIXES = ("api-key", "api-keys", "-password", "-token", "-secret")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
POLL_S = 0.05  # readiness poll period: start-up completion is noticed within ~100 ms


class AgentError(Exception):
    def __init__(self, kind: str, message: str, **extra: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.extra = extra


# ---------------------------------------------------------------------------- small helpers


def _is_secret_key(key: str) -> bool:
    upper = key.upper()
    return any(m in upper for m in SECRET_ENV_MARKERS) or upper.endswith(SECRET_ENV_SUFFIXES)


def _is_secret_flag(flag: str) -> bool:
    lower = flag.lower()
    return lower in SECRET_ARG_FLAGS or (
        lower.startswith("--") and lower.endswith(SECRET_FLAG_SUFFIXES)
    )


def _redact_env(env: dict) -> dict:
    return {k: ("***" if _is_secret_key(k) else v) for k, v in env.items()}


def _redact_argv(argv: list) -> list:
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("***")
            hide = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag.startswith("--") and _is_secret_flag(flag):
            out.append(f"{flag}=***" if eq else arg)
            hide = not eq
            continue
        out.append(arg)
    return out


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _name(value: object) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise AgentError("bad_request", f"invalid name {value!r}")
    return value


def _write_json_atomic(path: str, data: object) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise AgentError("corrupt", f"cannot read {path}: {exc}") from exc


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
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


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    if os.path.isdir("/proc"):
        return _proc_stat(pid) is not None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None and st[1] == pgid:
                pids.append(int(entry))
    return pids


def _group_is_ours(rec: dict) -> bool:
    """Does the recorded process group still belong to the component we started?

    The kernel never hands out a pid that is still some group's pgid, so if the leader's pid is
    alive with a different start time, our group is gone and that pid belongs to a stranger.
    """
    pgid = rec.get("pgid")
    if not pgid:
        return False
    leader = _proc_stat(pgid)
    return leader is None or rec.get("starttime") is None or leader[2] == rec["starttime"]


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, int(port))) == 0


def _listeners() -> dict[int, set[str]]:
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


def _pids_by_inode(inodes: set[str]) -> list[int]:
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


def _tail(path: str, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:]) if lines > 0 else ""


class Workdir:
    def __init__(self, root: str) -> None:
        if not root or not os.path.isabs(root):
            raise AgentError("bad_request", f"workdir must be an absolute path, got {root!r}")
        self.root = root

    def sub(self, *parts: str) -> str:
        path = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def log(self, name: str) -> str:
        return self.sub("logs", f"{name}.log")

    def run(self, name: str) -> str:
        return self.sub("run", f"{name}.json")

    def exit(self, name: str) -> str:
        return self.sub("run", f"{name}.exit.json")

    def state(self, name: str) -> str:
        return self.sub("state", f"{name}.json")

    def lock(self) -> str:
        return self.sub("deploy.lock")


# ---------------------------------------------------------------------------- processes


def _monitor(wd: Workdir, name: str, argv: list, env: dict, log_path: str, wfd: int) -> None:
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
    st = _proc_stat(proc.pid)
    os.write(wfd, json.dumps({"pid": proc.pid, "starttime": st[2] if st else None}).encode())
    os.close(wfd)
    code = proc.wait()
    with contextlib.suppress(OSError):
        _write_json_atomic(
            wd.exit(name), {"pid": proc.pid, "exit_code": code, "exited_at": _now_iso()}
        )
    os._exit(0)


def op_start(wd: Workdir, req: dict) -> dict:
    name = _name(req.get("name"))
    argv = [str(a) for a in req.get("argv") or []]
    if not argv:
        raise AgentError("bad_request", "start needs a non-empty argv")
    spec_env = {str(k): str(v) for k, v in (req.get("env") or {}).items()}
    ports = [int(p) for p in req.get("ports") or []]
    old = _read_json(wd.run(name))
    if old and _pid_alive(old.get("pid")):
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
    argv: list,
    env: dict,
    spec_env: dict,
    ports: list,
    log_path: str,
    mask: set,
) -> dict:
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
        "argv": _redact_argv(argv),
        "env": _redact_env(spec_env),
        "ports": ports,
        "started_at": _now_iso(),
        "log_path": log_path,
        "monitor_pid": child,
    }
    _write_json_atomic(wd.run(name), record)
    return record


def _await_exit_record(wd: Workdir, name: str, pid: int | None, within_s: float = 1.0) -> None:
    """The monitor writes the exit record just after reaping; give it a moment when we saw death first."""
    deadline = time.monotonic() + within_s
    while pid and time.monotonic() < deadline:
        ex = _read_json(wd.exit(name)) or {}
        if ex.get("pid") == pid:
            return
        time.sleep(0.01)


def _state_of(wd: Workdir, name: str, ports: list | None = None) -> dict:
    rec = _read_json(wd.run(name)) or {}
    pid = rec.get("pid")
    alive = _pid_alive(pid)
    if alive and rec.get("starttime") is not None:
        st = _proc_stat(pid)  # same pid number but a different process: ours is gone
        alive = bool(st and st[2] == rec["starttime"])
    ex = _read_json(wd.exit(name)) or {}
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
        "ports_open": {str(p): _port_open(p) for p in want},
        "log_path": rec.get("log_path") or wd.log(name),
        "exit_code": ex.get("exit_code") if ex.get("pid") == pid and pid else None,
        "recorded": bool(rec),
    }


def op_status(wd: Workdir, req: dict) -> dict:
    ports = req.get("ports") or {}
    return {n: _state_of(wd, _name(n), ports.get(n)) for n in req.get("names") or []}


def _wait_gone(pgid: int, deadline: float) -> list[int]:
    while True:
        left = _group_members(pgid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def _wait_pid_gone(pid: int, deadline: float) -> bool:
    while _proc_stat(pid) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _terminate(rec: dict, pgid: int, members: list, grace: float, signals: list) -> list:
    """SIGTERM the server process only, give its own graceful shutdown `grace` seconds, then
    SIGKILL what is left of the group.

    SGLang's TokenizerManager (the server process) handles SIGTERM: it drains, sends its
    schedulers ShutdownReq and waits up to 15 s for them to release the GPUs before it kills
    them; the schedulers install no SIGTERM handler, so a SIGTERM to the whole group would
    kill them at once and skip that path. A group whose leader is already gone gets SIGTERM.
    """
    main = rec.get("pid")
    main_alive = bool(main) and main in members
    signals.append("SIGTERM")
    deadline = time.monotonic() + grace
    with contextlib.suppress(ProcessLookupError):
        if main_alive:
            os.kill(main, signal.SIGTERM)
        else:
            os.killpg(pgid, signal.SIGTERM)
    if main_alive and _wait_pid_gone(main, deadline):
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


def op_stop(wd: Workdir, req: dict) -> dict:
    name = _name(req.get("name"))
    grace = float(req.get("grace_s", 10.0))
    rec = _read_json(wd.run(name)) or {}
    ports = [
        int(p)
        for p in (req.get("ports") if req.get("ports") is not None else rec.get("ports") or [])
    ]
    pgid = rec.get("pgid")
    t0 = time.monotonic()
    signals: list[str] = []
    members = _group_members(pgid) if _group_is_ours(rec) else []
    if members:
        members = _terminate(rec, pgid, members, grace, signals)
        if not members:
            _await_exit_record(wd, name, rec.get("pid"))
    # A listener can outlive the group by a few ms while the kernel tears the socket down.
    deadline = time.monotonic() + 1.0
    open_ports = [p for p in ports if _port_open(p)]
    while open_ports and time.monotonic() < deadline:
        time.sleep(0.02)
        open_ports = [p for p in open_ports if _port_open(p)]
    held = {}
    if open_ports:
        lst = _listeners()
        held = {str(p): _pids_by_inode(lst.get(p, set())) for p in open_ports}
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


def op_kill(wd: Workdir, req: dict) -> dict:
    name = _name(req.get("name"))
    rec = _read_json(wd.run(name)) or {}
    sig = getattr(signal, "SIG" + str(req.get("signal", "KILL")).upper().removeprefix("SIG"))
    if not _state_of(wd, name, [])["alive"]:
        return {"name": name, "killed": False}
    with contextlib.suppress(ProcessLookupError):
        if req.get("group", False):
            os.killpg(rec["pgid"], sig)
        else:
            os.kill(rec["pid"], sig)
    return {"name": name, "killed": True, "pid": rec["pid"]}


def op_log_tail(wd: Workdir, req: dict) -> dict:
    name = _name(req.get("name"))
    return {"name": name, "text": _tail(wd.log(name), int(req.get("lines", 50)))}


# ---------------------------------------------------------------------------- HTTP


def _request(
    method: str, url: str, body: str | None, headers: dict, timeout: float
) -> tuple[int, str]:
    import urllib.error  # lazy: urllib costs as much as the rest of the agent's start-up
    import urllib.request

    data = body.encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(1 << 20).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(1 << 20).decode("utf-8", "replace")


def op_http(wd: Workdir, req: dict) -> dict:
    t0 = time.monotonic()
    try:
        status, body = _request(
            req.get("method", "GET"),
            req["url"],
            req.get("body"),
            req.get("headers") or {},
            float(req.get("timeout_s", 10.0)),
        )
    except Exception as exc:  # noqa: BLE001 - refused, reset, bad status line: no answer
        return {"status": None, "body": "", "error": str(exc), "elapsed_s": time.monotonic() - t0}
    return {"status": status, "body": body, "error": None, "elapsed_s": time.monotonic() - t0}


HTTP_MANY_PARALLEL = 16


def op_http_many(wd: Workdir, req: dict) -> dict:
    """Several requests in one agent call, made concurrently (at most 16 at a time) so the
    call takes about as long as the slowest request; replies in the order asked."""
    import threading
    import urllib.request  # noqa: F401 - import once here, not racing in the threads

    items = req.get("requests")
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("url") for i in items):
        raise AgentError("bad_request", "http_many needs a list of requests, each with a url")
    timeout = float(req.get("timeout_s", 10.0))
    replies: list = [None] * len(items)
    gate = threading.Semaphore(HTTP_MANY_PARALLEL)

    def one(i: int, item: dict) -> None:
        with gate:
            try:
                replies[i] = op_http(wd, {"timeout_s": timeout, **item})
            except Exception as exc:  # noqa: BLE001 - one bad item must not lose the others
                replies[i] = {"status": None, "body": "", "error": str(exc), "elapsed_s": 0.0}

    threads = [threading.Thread(target=one, args=(i, it), daemon=True) for i, it in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"replies": replies}


def op_wait_http(wd: Workdir, req: dict) -> dict:
    url = req["url"]
    timeout = float(req.get("timeout_s", 60.0))
    expect = req.get("expect", 200)
    expect_set = None if expect is None else set(expect if isinstance(expect, list) else [expect])
    name = req.get("name")
    # Import before the clock starts: the lazy import costs tens of ms (more on a loaded box)
    # and would make the first poll start late and its recorded start time wrong.
    import urllib.request  # noqa: F401

    t0 = time.monotonic()
    last = "no answer yet"
    attempts = 0
    last_miss_at = None  # start of the last attempt that did not succeed
    caller = os.getppid()
    while True:
        if os.getppid() != caller:
            # Our caller (the SSH session or the CLI) is gone: nobody will read the answer, so
            # stop polling instead of lingering on the target until the timeout.
            os._exit(3)
        attempts += 1
        started = time.monotonic()
        elapsed = started - t0
        try:
            status, body = _request("GET", url, None, {}, max(0.05, min(1.0, timeout - elapsed)))
            if expect_set is None or status in expect_set:
                now = time.monotonic()
                # The poll timing as measured here, so a caller can check the polling itself
                # (gap between the last miss and the hit) apart from transport and server time.
                return {
                    "elapsed_s": round(now - t0, 4),
                    "status": status,
                    "attempts": attempts,
                    "detected_at_monotonic": now,
                    "first_poll_at_monotonic": t0,
                    "last_miss_at_monotonic": last_miss_at,
                    "hit_started_at_monotonic": started,
                }
            last = f"HTTP {status}: {body[:200]}"
        except Exception as exc:  # noqa: BLE001 - refused, reset, bad status line: no answer
            last = str(getattr(exc, "reason", exc))
        last_miss_at = started
        if name:
            st = _state_of(wd, _name(name), [])
            if not st["alive"]:
                _await_exit_record(wd, name, st["pid"])
                st = _state_of(wd, name, [])
                raise AgentError(
                    "died",
                    f"{name} exited (code {st['exit_code']}) before {url} was ready",
                    elapsed_s=round(time.monotonic() - t0, 4),
                    exit_code=st["exit_code"],
                    log_tail=_tail(wd.log(name), 40),
                    last=last,
                )
        if time.monotonic() - t0 >= timeout:
            raise AgentError(
                "timeout",
                f"{url} not ready after {timeout:g}s (last: {last})",
                elapsed_s=round(time.monotonic() - t0, 4),
                last=last,
                log_tail=_tail(wd.log(name), 40) if name else "",
            )
        time.sleep(POLL_S)


# ---------------------------------------------------------------------------- preflight


def _gpus(indices: list) -> dict:
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        apps = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except FileNotFoundError:
        return {"available": False, "note": "no nvidia-smi", "busy": {}}
    except subprocess.TimeoutExpired:
        return {"available": False, "note": "nvidia-smi timed out", "busy": {}}
    if out.returncode != 0:
        return {
            "available": False,
            "note": f"nvidia-smi failed: {out.stderr.strip()[:200]}",
            "busy": {},
        }
    by_uuid: dict[str, list[int]] = {}
    for line in apps.stdout.splitlines():
        if "," in line:
            uuid, pid = (x.strip() for x in line.split(",", 1))
            with contextlib.suppress(ValueError):
                by_uuid.setdefault(uuid, []).append(int(pid))
    gpus = {}
    for line in out.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3:
            gpus[int(parts[0])] = {"pids": by_uuid.get(parts[1], []), "memory_used_mib": parts[2]}
    want = indices if indices else sorted(gpus)
    missing = [i for i in want if i not in gpus]
    return {
        "available": True,
        "note": None,
        "missing": missing,
        "busy": {str(i): gpus[i]["pids"] for i in want if i in gpus and gpus[i]["pids"]},
    }


def _our_pgids(wd: Workdir) -> dict[int, str]:
    run_dir = os.path.join(wd.root, "run")
    out = {}
    if os.path.isdir(run_dir):
        for fn in os.listdir(run_dir):
            if fn.endswith(".json") and not fn.endswith(".exit.json"):
                rec = _read_json(os.path.join(run_dir, fn)) or {}
                if _group_is_ours(rec):
                    out[int(rec["pgid"])] = rec.get("name", fn[:-5])
    return out


def op_preflight(wd: Workdir, req: dict) -> dict:
    writable, why = True, None
    try:
        probe = wd.sub(".dsv4ops", f"write-probe.{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as exc:
        writable, why = False, str(exc)
    ours = _our_pgids(wd)
    lst = _listeners()
    ports = {}
    for p in req.get("ports") or []:
        p = int(p)
        in_use = p in lst or _port_open(p)
        pids = _pids_by_inode(lst.get(p, set())) if in_use else []
        owners = []
        for pid in pids:
            st = _proc_stat(pid)
            owners.append({"pid": pid, "ours": ours.get(st[1]) if st else None})
        ports[str(p)] = {"in_use": in_use, "holders": owners}
    paths = {str(p): os.path.exists(p) for p in req.get("paths") or []}
    return {
        "workdir": wd.root,
        "writable": writable,
        "writable_error": why,
        "ports": ports,
        "gpus": _gpus(req.get("gpus") or []),
        "paths": paths,
        "host": socket.gethostname(),
    }


# ---------------------------------------------------------------------------- lock and state


def _lock_view(wd: Workdir, dead_pids: list) -> dict | None:
    holder = _read_json(wd.lock())
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


def _holder_gone(holder: dict) -> bool:
    """The lock holder's process no longer exists: its pid is dead, or now belongs to another
    process (start time, field 22 of /proc/PID/stat, or the boot differs from what the holder
    recorded; dsv4ops/remote/procident.py is the CLI side of this rule)."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or not _pid_alive(pid):
        return True
    boot = holder.get("boot_id")
    if isinstance(boot, str) and _boot_id() not in (None, boot):
        return True
    start = holder.get("pid_start")
    if isinstance(start, int) and os.path.isdir("/proc"):
        stat = _proc_stat(pid)
        return stat is None or stat[2] != start
    return False


def op_lock_acquire(wd: Workdir, req: dict) -> dict:
    holder = dict(req.get("holder") or {})
    holder.setdefault("started_at", _now_iso())
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
    with open(tmp, "w") as f:
        json.dump(holder, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)  # atomic: fails if it exists, and readers never see a half-written lock
    except FileExistsError:
        view = _lock_view(wd, req.get("dead_pids") or [])
        raise AgentError(
            "lock_held", "deploy lock is held", **(view or {"holder": {}, "stale": False})
        ) from None
    finally:
        os.remove(tmp)
    return {"acquired": True, "holder": holder, "broke": broken}


def op_lock_release(wd: Workdir, req: dict) -> dict:
    view = _lock_view(wd, [])
    if view is None:
        return {"released": False}
    if view["holder"].get("op_id") != req.get("op_id"):
        raise AgentError("lock_held", "deploy lock is held by another operation", **view)
    os.remove(wd.lock())
    return {"released": True}


def op_lock_info(wd: Workdir, req: dict) -> dict | None:
    return _lock_view(wd, req.get("dead_pids") or [])


def op_read_state(wd: Workdir, req: dict) -> dict:
    return {"data": _read_json(wd.state(_name(req.get("name"))))}


def op_write_state(wd: Workdir, req: dict) -> dict:
    _write_json_atomic(wd.state(_name(req.get("name"))), req.get("data"))
    return {"written": True}


def _own_sha256() -> str:
    import hashlib

    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def op_hello(wd: Workdir, req: dict) -> dict:
    return {
        "sha256": _own_sha256(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "user": _user(),
    }


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


OPS = {
    "hello": op_hello,
    "start": op_start,
    "stop": op_stop,
    "status": op_status,
    "kill": op_kill,
    "log_tail": op_log_tail,
    "http": op_http,
    "http_many": op_http_many,
    "wait_http": op_wait_http,
    "preflight": op_preflight,
    "lock_acquire": op_lock_acquire,
    "lock_release": op_lock_release,
    "lock_info": op_lock_info,
    "read_state": op_read_state,
    "write_state": op_write_state,
}


def main() -> int:
    try:
        req = json.loads(sys.stdin.read() or "{}")
        op = OPS.get(req.get("op"))
        want = req.get("agent_sha256")
        if want and want != _own_sha256():  # the operator has a different agent: re-upload first
            raise AgentError("stale_agent", "agent on the target is a different version")
        if op is None:
            raise AgentError("bad_request", f"unknown op {req.get('op')!r}")
        reply: dict = {"ok": True, "result": op(Workdir(req.get("workdir", "")), req)}
    except AgentError as exc:
        reply = {"ok": False, "kind": exc.kind, "error": str(exc), **exc.extra}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reply = {"ok": False, "kind": "internal", "error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(reply))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
