"""SSHExecutor: the execution seam over SSH, built on fabric's Connection (paramiko underneath).

* Host keys are checked against a known_hosts file (default ~/.ssh/known_hosts) and an unknown
  or changed key is refused (fabric's own default would auto-add). `trust_on_first_use=True`
  accepts an unknown key once and records it in that file; a *changed* key, or one marked
  `@revoked` there, is refused either way, before authentication.
* argv is joined with `shlex.quote` per element, so a value with `;`, `$(...)` or spaces reaches
  the program as one argument.
* Env is not sent with SSH `setenv` (servers drop it unless AcceptEnv allows it) and secret
  values never go on a command line: env is written as one JSON line ahead of stdin and a tiny
  python wrapper on the target execs argv with it. The same wrapper terminates the command's
  process group when the channel goes away (timeout, drop), as the local executor kills a
  command that times out.
* Every connect/auth/host-key/transport failure becomes a TargetError naming user@host:port; a
  connection that drops mid-command does too, and the next call reconnects. Once connected, a
  drop, and a reconnect that fails the way a network fails (not a key or an authentication
  refusal), is a ConnectionLostError saying whether the command may have reached the target:
  what remote/rideout.py needs to decide whether the call is sent again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import fabric
import paramiko

from dsv4ops.clock import SystemClock
from dsv4ops.errors import ConnectionLostError, TargetError
from dsv4ops.localfiles import FileRefused
from dsv4ops.remote._redact import check_result, make_result
from dsv4ops.remote.base import CommandResult
from dsv4ops.remote.errors import upload_failed
from dsv4ops.remote.ssh_trust import HostKeyPolicy, RevokedHostKey, key_id, load_known_hosts
from dsv4ops.whoami import local_user

_CLOCK = SystemClock()

# paramiko logs every transport failure, traceback and all, from its own thread; with no handler
# configured, Python's last-resort handler prints that on the operator's terminal ahead of the
# one-line TargetError that says the same. A NullHandler keeps it off the terminal; a program
# that configures logging still gets paramiko's records through its own handlers.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

# paramiko's texts (5.1: auth_handler.py, transport.py) for a socket that closed while it waited
# for the server's answer to authentication; for a call on a transport that had already closed
# (after the key exchange, before or during authentication); and for one closed before the
# server's banner.
_TRANSPORT_GONE = "transport shut down or saw EOF"
_NO_SESSION = "No existing session"
_NO_BANNER = "Error reading SSH protocol banner"

# Every command runs under this stdlib-only wrapper (with the target's python). It
# 1. reads one JSON line of env from fd 0 byte by byte when argv[1] is "e" (so the rest of
#    stdin stays unread for the program) and execs the program with it: no value is ever on a
#    command line and the server's AcceptEnv does not matter;
# 2. first double-forks a watcher that stays in the command's process group (sshd made it a
#    fresh session) holding only stdout/stderr. When the client gives up (timeout) or the
#    connection drops, sshd closes those sockets/pipes and the watcher sees POLLHUP/POLLERR:
#    it sends SIGTERM to the group, then SIGKILL after 2 s, so a timed-out command does not
#    keep running on the box. It exits as soon as the command does (pidfd, else a 0.1 s
#    check), so it never holds the channel open. The program keeps the wrapper's pid, exit
#    status and signal, and has no extra child to reap. Processes that left the group
#    (setsid, as the agent does for components) are not touched.
_WRAPPER = (
    "import json,os,select,signal,sys,time\n"
    "p=os.getpid();g=os.getpgrp()\n"
    "try:fd=os.pidfd_open(p)\n"
    "except (AttributeError,OSError):fd=None\n"
    "if g==p or os.getsid(0)==g:\n"  # only a group of our own: never signal a shared one
    " if os.fork()==0:\n"
    "  if os.fork():os._exit(0)\n"
    "  n=os.open(os.devnull,os.O_RDWR);os.dup2(n,0)\n"
    "  signal.signal(signal.SIGTERM,signal.SIG_IGN);signal.signal(signal.SIGHUP,signal.SIG_IGN)\n"
    "  def gone():\n"
    "   if fd is not None:return bool(select.select([fd],[],[],0)[0])\n"
    "   try:os.kill(p,0);return False\n"
    "   except OSError:return True\n"
    "  w=select.poll();w.register(1,0);w.register(2,0)\n"
    "  if fd is not None:w.register(fd,select.POLLIN)\n"
    "  while not gone():\n"
    "   if [e for f,e in w.poll(None if fd is not None else 100) if f in(1,2)] and not gone():\n"
    "    os.killpg(g,signal.SIGTERM);t=time.monotonic()+2\n"
    "    while not gone() and time.monotonic()<t:time.sleep(0.02)\n"
    "    os.killpg(g,signal.SIGKILL)\n"
    "  os._exit(0)\n"
    " os.wait()\n"
    "if fd is not None:os.close(fd)\n"
    "e=dict(os.environ)\n"
    "if sys.argv[1]=='e':\n"
    " b=b''\n"
    " while not b.endswith(b'\\n'):\n"
    "  c=os.read(0,1)\n"
    "  if not c:break\n"
    "  b+=c\n"
    " e.update(json.loads(b or b'{}'))\n"
    "try:os.execvpe(sys.argv[2],sys.argv[2:],e)\n"
    "except OSError as x:\n"
    " sys.stderr.write('%s: %s\\n'%(sys.argv[2],x.strerror));os._exit(127 if x.errno==2 else 126)\n"
)


def build_command(argv: Sequence[str], *, cwd: str | None, python: str, with_env: bool) -> str:
    """The remote shell command line for argv: every element quoted, run under the wrapper."""
    words = [python, "-I", "-S", "-c", _WRAPPER, "e" if with_env else "-", *(str(a) for a in argv)]
    cmd = " ".join(shlex.quote(w) for w in words)
    if cwd:
        cmd = f"cd {shlex.quote(cwd)} && {cmd}"
    return cmd


class SSHExecutor:
    """Runs commands on one SSH target; connects lazily, reconnects after a dropped connection."""

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        user: str | None = None,
        key: str | None = None,
        known_hosts: str | None = None,
        trust_on_first_use: bool = False,
        connect_timeout_s: float = 10.0,
        python: str = "python3",
    ) -> None:
        self.host = host
        self.port = int(port)
        self.user = user or local_user()
        self.key = key
        self.known_hosts = known_hosts or os.path.expanduser("~/.ssh/known_hosts")
        self.trust_on_first_use = trust_on_first_use
        self.connect_timeout_s = connect_timeout_s
        self.python = python
        self._conn: fabric.Connection | None = None
        self._connected_once = False  # a failure to connect after that is a lost connection

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    # ------------------------------------------------------------------ connection

    def _connection(self) -> fabric.Connection:
        if self._conn is not None and self._conn.is_connected:
            return self._conn
        self.close()
        kh = Path(self.known_hosts)
        if not kh.exists():
            if not self.trust_on_first_use:
                raise TargetError(
                    f"{self.where}: known_hosts file {kh} does not exist",
                    hint="add the host's key to it (ssh-keyscan) or enable first-use trust for this target",
                )
            kh.parent.mkdir(parents=True, exist_ok=True)
            kh.touch(mode=0o600)
        connect_kwargs: dict[str, object] = {
            "allow_agent": False,
            "look_for_keys": self.key is None,
        }
        if self.key:
            connect_kwargs["key_filename"] = [self.key]
        config = fabric.Config(overrides={"load_ssh_configs": False})
        conn = fabric.Connection(
            self.host,
            user=self.user,
            port=self.port,
            config=config,
            connect_timeout=int(max(1, self.connect_timeout_s)),
            connect_kwargs=connect_kwargs,
        )
        client = conn.client
        try:
            revoked = load_known_hosts(client.get_host_keys(), kh)
        except (OSError, UnicodeDecodeError, FileRefused) as exc:
            raise TargetError(f"{self.where}: cannot read known_hosts {kh}: {exc}") from None
        client.set_missing_host_key_policy(
            HostKeyPolicy(revoked, kh if self.trust_on_first_use else None)
        )
        try:
            conn.open()
            # Belt and braces: the policy already refused a revoked key before authentication.
            server_key = client.get_transport().get_remote_server_key()
            if key_id(server_key) in revoked:
                raise RevokedHostKey(server_key)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            # A half-open transport would keep its thread and socket until garbage collection.
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                conn.close()
            failure = self._open_failure(exc, kh, revoked)
            if self._connected_once and _network_failure(exc):
                raise ConnectionLostError(failure.message, sent=False, hint=failure.hint) from None
            raise failure from None
        transport = conn.client.get_transport()
        if transport is not None:
            transport.set_keepalive(30)  # readiness waits can be silent for minutes
        self._conn = conn
        self._connected_once = True
        return conn

    def _open_failure(
        self, exc: BaseException, kh: Path, revoked: set[tuple[str, str]]
    ) -> TargetError:
        """What a failed connect means to the operator, by the exception paramiko raised."""
        if isinstance(exc, RevokedHostKey) or (
            isinstance(exc, paramiko.BadHostKeyException) and key_id(exc.key) in revoked
        ):
            # The second case: another trusted key of that type, plus a revoked one.
            return TargetError(
                f"{self.where}: host key {exc.key.get_name()} {exc.key.fingerprint} is revoked "
                f"(marked @revoked in {kh}); refusing to connect",
                hint="a revoked key must never be trusted again: verify the host out of band",
            )
        if isinstance(exc, paramiko.BadHostKeyException):
            return TargetError(
                f"{self.where}: host key does not match {kh} (got {exc.key.get_name()}); refusing to connect",
                hint="if the host was legitimately re-keyed, remove its old line from known_hosts",
            )
        text = str(exc)
        if isinstance(exc, paramiko.AuthenticationException):
            if _TRANSPORT_GONE in text:
                # paramiko's words when the socket closed while it waited for the server's
                # answer: a cut connection (or a server that dropped it), not a refused key.
                return TargetError(
                    f"{self.where}: connection dropped during authentication: the server "
                    "closed it before accepting or refusing the key"
                )
            return TargetError(f"{self.where}: authentication failed ({exc})")
        if isinstance(exc, paramiko.SSHException):
            if "not found in known_hosts" in text:
                return TargetError(
                    f"{self.where}: host key is not in {kh}; refusing to connect to an unknown host",
                    hint="add it with ssh-keyscan, or enable first-use trust for this target",
                )
            if text == _NO_SESSION:
                return TargetError(
                    f"{self.where}: connection dropped while connecting: the SSH transport "
                    "closed before the session was set up"
                )
            if text.startswith(_NO_BANNER):
                detail = text[len(_NO_BANNER) :].strip()
                return TargetError(
                    f"{self.where}: cannot connect: no SSH banner from the server "
                    f"({detail or 'the connection closed or timed out first'})",
                    hint="sshd closes new connections before its banner while too many are "
                    "still authenticating (MaxStartups), and a network cut looks the same: "
                    "try again, then check the server",
                )
            return TargetError(f"{self.where}: SSH error: {exc}")
        # refused, unreachable, DNS, timeout, reset; a bare EOFError is the server hanging up
        closed = "the server closed the connection" if isinstance(exc, EOFError) else ""
        reason = getattr(exc, "strerror", None) or text or closed or type(exc).__name__
        return TargetError(f"{self.where}: cannot connect: {reason}")

    def close(self) -> None:
        if self._conn is not None:
            # a dropped connection may fail to close cleanly; nothing more to release then
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SSHExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _dropped(
        self, what: str, exc: BaseException | None = None, *, sent: bool
    ) -> ConnectionLostError:
        self.close()
        detail = f": {exc}" if exc and str(exc) else ""
        return ConnectionLostError(
            f"{self.where}: connection dropped during {what}{detail}", sent=sent
        )

    # ------------------------------------------------------------------ commands

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> CommandResult:
        """Run argv on the target; raises RemoteCommandError (check) or TargetError (transport)."""
        argv = [str(a) for a in argv]
        command = build_command(argv, cwd=cwd, python=self.python, with_env=bool(env))
        payload = (json.dumps(dict(env)) + "\n" if env else "") + (stdin or "")
        transport = self._connection().client.get_transport()
        t0 = _CLOCK.monotonic()
        if transport is None or not transport.is_active():
            raise self._dropped("command start", sent=False)
        try:
            chan = transport.open_session(timeout=self.connect_timeout_s)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._dropped(f"`{argv[0]}`", exc, sent=False) from None  # no channel, no command
        try:
            # From the exec request on, the server may have started the command.
            chan.exec_command(command)
            if payload:
                chan.sendall(payload.encode())
            chan.shutdown_write()
            code, out, err, timed_out = _collect(chan, transport, t0, timeout)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._dropped(f"`{argv[0]}`", exc, sent=True) from None
        if code is None:
            raise self._dropped(f"`{argv[0]}`", sent=True)
        result = make_result(
            argv,
            code,
            out,
            err,
            _CLOCK.monotonic() - t0,
            host=self.host,
            timed_out=timed_out,
            env=env,
        )
        return check_result(result) if check else result

    def put(self, local: Path, remote: str) -> None:
        """Upload a file over SFTP; on failure the partial file is removed and TargetError
        (DiskFullError for a full disk) raised."""
        try:
            self._connection().put(str(local), remote=remote)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise upload_failed(self.where, remote, exc, removed=self._remove(remote)) from None

    def _remove(self, remote: str) -> bool:
        """Delete what a failed upload left at `remote`; whether nothing is left there."""
        try:
            return self.run(["rm", "-f", remote], timeout=30.0, check=False).ok
        except TargetError:
            return False

    def get(self, remote: str, local: Path) -> None:
        """Download a file over SFTP; raises TargetError on failure."""
        try:
            self._connection().get(remote, local=str(local))
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise TargetError(f"{self.where}: download of {remote} failed: {exc}") from None


def _network_failure(exc: BaseException) -> bool:
    """A connect failure a network outage gives (refused, reset, timed out, closed before the
    banner or during authentication), not a key or an authentication refusal: riding it out
    can only end with the same refusal."""
    if isinstance(exc, RevokedHostKey | paramiko.BadHostKeyException):
        return False
    if isinstance(exc, paramiko.AuthenticationException):
        return _TRANSPORT_GONE in str(exc)
    if isinstance(exc, paramiko.SSHException):
        return "not found in known_hosts" not in str(exc)
    return isinstance(exc, OSError | EOFError)


def _collect(
    chan: paramiko.Channel, transport: paramiko.Transport, t0: float, timeout: float | None
) -> tuple[int | None, str, str, bool]:
    """Read both streams until exit. Exit code None means the connection went away."""
    out, err = bytearray(), bytearray()
    deadline = None if timeout is None else t0 + timeout
    while True:
        wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - _CLOCK.monotonic()))
        select.select([chan], [], [], wait)
        while chan.recv_ready():
            out += chan.recv(65536)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(65536)
        if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
            break
        if not transport.is_active() or (chan.closed and not chan.exit_status_ready()):
            chan.close()
            return None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), False
        if deadline is not None and _CLOCK.monotonic() >= deadline:
            chan.close()
            return -1, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True
    code = chan.recv_exit_status()
    chan.close()
    text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if code != -1:
        return code, text_out, text_err, False
    # No exit status: either the command was killed by a signal (the server reports that as
    # exit-signal, which paramiko does not turn into a status) or the connection died. A dead
    # connection shows as an inactive transport within moments.
    for _ in range(10):
        if not transport.is_active():
            return None, text_out, text_err, False
        _CLOCK.sleep(0.03)
    return -1, text_out, (text_err + "\n(terminated by a signal)").lstrip(), False
