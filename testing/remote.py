"""Test helpers and doubles for `dsv4ops.remote` (one module per package area).

- sshd: A real OpenSSH server on 127.0.0.1 for the SSH tests, with throwaway host and user keys.

Use the session-scoped `sshd` fixture (import it into a conftest), or `running_sshd(dir)` as a
context manager (benchmarks, demos). `SshdServer.drop_connections()` kills the sshd processes
serving open sessions, which is what a network drop looks like to the client. The commands
those sessions started then lose their stdout/stderr; the SSH executor's command wrapper
(`dsv4ops.remote.ssh`) sees that and ends them, as it does after a client-side timeout.
- wire: a target python that puts a stray line on the agent's wire (testing/programs/
remote_wire_tamper.py): `tampering_python(dir)` is its path, `tamper_once(dir, ...)` arms it for
one request; `OneShotLocalExecutor`, a local target whose agent calls are one process each (as
over SSH); `FakeAgentExecutor`, an agent that answers every call with one given line (the
property tests of the reply decoding).
- toy: Helpers for the supervisor tests around the toy component (testing/programs/remote_toy_server.py): its
argv, waiting for a line in its log, and the teardown that kills every process group started.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import testing.programs.remote_toy_server
import testing.programs.remote_wire_tamper
from dsv4ops.remote import CommandResult, LocalExecutor
from testing.ports import free_port

# --- sshd (was testing/remote.py) ---

SSHD = "/usr/sbin/sshd"

_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {dir}/ssh_host_ed25519_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
LogLevel ERROR
MaxStartups 100:30:200
MaxSessions 100
SetEnv HOME={dir}/home
"""


def ensure_sshd_installed() -> None:
    """Install openssh-server when /usr/sbin/sshd is missing (needs root and apt)."""
    if os.path.exists(SSHD):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "openssh-server"],
    ):
        subprocess.run(argv, check=False, capture_output=True, timeout=600, env=env)
    if not os.path.exists(SSHD):
        pytest.fail("openssh-server is not installed and could not be installed (need root + apt)")


def _keygen(path: Path) -> str:
    """A fresh passphrase-less ed25519 key pair at path(.pub); returns the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dsv4ops-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return Path(f"{path}.pub").read_text().strip()


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                    out.append(int(entry))
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@dataclass
class SshdServer:
    host: str
    port: int
    user: str
    client_key: str
    known_hosts: str
    host_key_line: str
    directory: Path
    process: subprocess.Popen[bytes]

    def connect_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for `dsv4ops.remote.connect("ssh", **kw)`."""
        kw: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key": self.client_key,
            "known_hosts": self.known_hosts,
        }
        kw.update(overrides)
        return kw

    def executor(self, **overrides: Any) -> Any:
        from dsv4ops.remote.ssh import SSHExecutor

        kw = self.connect_kwargs(**overrides)
        return SSHExecutor(kw.pop("host"), **kw)

    def session_pids(self) -> list[int]:
        """sshd processes serving sessions (descendants of the listener named sshd)."""
        found, todo = [], _children(self.process.pid)
        while todo:
            pid = todo.pop()
            if _comm(pid).startswith("sshd"):
                found.append(pid)
                todo.extend(_children(pid))
        return found

    def drop_connections(self) -> int:
        """SIGKILL every sshd process serving a session; returns how many were killed."""
        pids = self.session_pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)


def _with_settings(config: str, settings: Mapping[str, str]) -> str:
    lines = [ln for ln in config.splitlines() if ln.split(" ", 1)[0] not in settings]
    return "\n".join([*lines, *(f"{k} {v}" for k, v in settings.items())]) + "\n"


@contextlib.contextmanager
def running_sshd(
    directory: Path, settings: Mapping[str, str] | None = None
) -> Iterator[SshdServer]:
    """Start sshd on 127.0.0.1:<free port> with fresh keys; stop it (and its sessions) on exit.

    `settings` replace (or add) sshd_config keywords, e.g. {"MaxStartups": "1"}.
    """
    ensure_sshd_installed()
    directory.mkdir(parents=True, exist_ok=True)
    os.makedirs("/run/sshd", exist_ok=True)  # privilege-separation directory sshd insists on
    host_pub = _keygen(directory / "ssh_host_ed25519_key")
    client_pub = _keygen(directory / "client_ed25519")
    (directory / "authorized_keys").write_text(client_pub + "\n")
    # The session's HOME is a clean directory: the operator's dotfiles (a .bashrc running
    # `pyenv init` costs ~0.5 s per command) neither slow nor change what the tests run.
    (directory / "home").mkdir(exist_ok=True)
    port = free_port()
    (directory / "sshd_config").write_text(
        _with_settings(_CONFIG.format(port=port, dir=directory), settings or {})
    )
    key_type, key_b64 = host_pub.split()[:2]
    host_key_line = f"[127.0.0.1]:{port} {key_type} {key_b64}"
    (directory / "known_hosts").write_text(host_key_line + "\n")
    log = open(directory / "sshd.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(directory / "sshd_config")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = SshdServer(
        "127.0.0.1",
        port,
        getpass.getuser(),
        str(directory / "client_ed25519"),
        str(directory / "known_hosts"),
        host_key_line,
        directory,
        proc,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(directory / 'sshd.log').read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("sshd did not start listening within 15 s")
            time.sleep(0.02)
        yield server
    finally:
        server.drop_connections()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


# --- toy (was testing/remote.py) ---

TOY = str(Path(testing.programs.remote_toy_server.__file__).resolve())


def toy_argv(*args: object) -> tuple[str, ...]:
    """argv that starts the toy component with this interpreter."""
    return (sys.executable, "-I", "-S", TOY, *map(str, args))


def wait_for_log_line(workdir: Path, name: str, text: str, within_s: float = 15.0) -> None:
    """Block until the component's log (on this machine for both executors) contains `text`."""
    log = workdir / "logs" / f"{name}.log"
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return
        time.sleep(0.01)
    raise AssertionError(f"{text!r} not in {log} after {within_s}s")


def kill_recorded_groups(workdir: Path) -> None:
    """Teardown safety net: SIGKILL every process group a test started (no orphans)."""
    for rec in (workdir / "run").glob("*.json"):
        if rec.name.endswith(".exit.json"):
            continue
        with contextlib.suppress(ValueError, OSError):
            pgid = json.loads(rec.read_text()).get("pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)


# --- wire ---

TAMPER = str(Path(testing.programs.remote_wire_tamper.__file__).resolve())


def tampering_python(folder: Path) -> str:
    """An executable to give a target as its python: this interpreter, with the agent behind
    the tamperer (armed by `tamper_once(folder, ...)`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tampering-python"
    env = f"{testing.programs.remote_wire_tamper.ENV}={folder / 'tamper.json'}"
    path.write_text(f'#!/bin/sh\nexport {env}\nexec {sys.executable} {TAMPER} "$@"\n')
    path.chmod(0o755)
    return str(path)


def tamper_once(folder: Path, op: str, to: str, line: str, name: str | None = None) -> Path:
    """Arm `tampering_python(folder)`: `line` goes on the agent's `to` ("stdout" or "stdin")
    ahead of the next `op` request (named `name`); returns the file that exists once it did."""
    once = folder / "tampered"
    once.unlink(missing_ok=True)
    config = {"op": op, "name": name, "to": to, "line": line, "once": str(once)}
    (folder / "tamper.json").write_text(json.dumps(config))
    return once


class OneShotLocalExecutor(LocalExecutor):
    """A local target the Supervisor keeps no agent session for (it does for a plain
    LocalExecutor only): every agent call is one process, as over SSH."""


REQUEST_ID = "<<request-id>>"  # in a FakeAgentExecutor's line: the request's id


class FakeAgentExecutor:
    """An Executor whose agent answers every command with `line` (REQUEST_ID in it replaced by
    the request's id), exit 0; `put` and `get` do nothing. For properties of what the Supervisor
    makes of a reply, fast; the real agent's wire is tested with `tampering_python`."""

    host = "fake"

    def __init__(self, line: str) -> None:
        self.line = line

    def run(
        self,
        argv: Any,
        *,
        timeout: float | None = None,
        check: bool = True,
        env: Any = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> CommandResult:
        rid = ""
        with contextlib.suppress(ValueError, AttributeError):
            rid = str(json.loads(stdin or "{}").get("id", ""))
        out = self.line.replace(REQUEST_ID, rid)
        return CommandResult(tuple(argv), 0, out, "", 0.0, host=self.host)

    def put(self, local: Path, remote: str) -> None:
        """Nothing to copy."""

    def get(self, remote: str, local: Path) -> None:
        """Nothing to copy."""

    def close(self) -> None:
        """Nothing to release."""
