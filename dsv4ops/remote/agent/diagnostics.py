"""Diagnostics on the target: each component's process tree, log tail and `py-spy dump`.

Everything is scrubbed here, before it leaves the target: the secret values of each process's
own environment (/proc/PID/environ, keys that look secret by dsv4ops/secrets.py's rule) and
secret argv flags. py-spy is used where it is installed (next to the agent's interpreter or on
PATH); where it is not, the reply says so instead of a dump.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from dsv4ops.secrets import argv_secret_values, is_secret_key, redact_argv, redact_text

from .common import JsonObject, Workdir, check_name, read_json
from .procfs import group_members, proc_stat, tail

PYSPY_TIMEOUT_S = 20.0


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[1])


def _secret_values(pid: int) -> set[str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return set()
    out = set()
    for item in items:
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep and is_secret_key(key) and len(value) >= 4:
            out.add(value)
    return out


def pyspy_path() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")


def _pyspy(pyspy: str, pid: int) -> str:
    try:
        done = subprocess.run(
            [pyspy, "dump", "--pid", str(pid)],
            capture_output=True,
            text=True,
            timeout=PYSPY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"py-spy dump --pid {pid}: no answer within {PYSPY_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"py-spy dump --pid {pid}: {exc}"
    text = done.stdout
    if done.returncode != 0:
        text += f"\n(py-spy exited {done.returncode}) {done.stderr.strip()}"
    return text


def _component(wd: Workdir, name: str, log_lines: int, pyspy: str | None) -> JsonObject:
    rec = read_json(wd.run(name)) or {}
    pgid = rec.get("pgid")
    members = sorted(group_members(int(pgid))) if isinstance(pgid, int) else []
    secrets: set[str] = set()
    for pid in members:  # the values themselves, wherever a dump or a log line repeats them
        secrets |= _secret_values(pid) | argv_secret_values(_cmdline(pid))

    def scrub(text: str) -> str:
        return redact_text(text, secrets)

    tree = []
    dumps: dict[str, str] = {}
    for pid in members:
        argv = _cmdline(pid)
        st = proc_stat(pid)
        tree.append(
            {
                "pid": pid,
                "ppid": _ppid(pid),
                "state": st[0] if st else "?",
                "argv": [scrub(a) for a in redact_argv(argv)],
            }
        )
        if pyspy is not None and any("python" in os.path.basename(a) for a in argv[:1]):
            dumps[str(pid)] = _pyspy(pyspy, pid)
    log = tail(wd.log(name), log_lines)
    return {
        "name": name,
        "pgid": pgid,
        "processes": tree,
        "log_tail": scrub(log),
        "py_spy": {k: scrub(v) for k, v in dumps.items()},
        "py_spy_missing": None if pyspy else "py-spy is not installed on the target",
    }


def op_diagnostics(wd: Workdir, req: JsonObject) -> JsonObject:
    names = [check_name(n) for n in req.get("names") or []]
    log_lines = int(req.get("log_lines", 400))
    pyspy = pyspy_path() if req.get("py_spy", True) else None
    return {"components": [_component(wd, n, log_lines, pyspy) for n in names]}
