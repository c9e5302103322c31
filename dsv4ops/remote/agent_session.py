"""One long-lived agent on this machine (`python -I -S agent.zip --serve`) for a local target.

A one-shot agent call is a process start: python, the agent's imports, and a fork of the calling
process, whose cost grows with its size (~50 ms a call here; a twin deploy makes ~60 calls).
For a local target the Supervisor sends its calls, one JSON line each, to one agent process
instead, which answers each exactly as a one-shot agent answers its one request
(`remote/agent/main.py` `serve`). What a one-shot call guaranteed, a session call keeps:

- a call that times out or is interrupted kills the session's whole process group (the command
  and whatever it spawned, never the detached components, which live in sessions of their own),
  as `LocalExecutor.run` does; the next call starts a new session;
- a session that cannot take a call without having run it (it did not start, or the zip on
  disk changed: `session_stale`) answers None, and the caller makes that call the one-shot way,
  with its upload-and-retry rules; a session that dies during a call reports it as a one-shot
  agent's crash would be reported, and the call is never repeated;
- the agent sees the caller's environment and working directory as a one-shot agent would:
  when either changed since the session started, the session is replaced first;
- a line is the reply to a call only when it carries that call's id (remote/wire.py). A line
  that does not (something else wrote to the agent's stdout, or the agent answered garbage on
  its stdin) ends the session at once, as a timeout does: its stream can no longer be matched
  to calls. That call is then the caller's transport failure, never answered out of turn; and
  a session that says anything between calls is replaced before the next call is sent.

Over SSH every call stays one channel and one process (dsv4ops/remote/ssh.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from typing import IO

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.remote.base import CommandResult

_START_TIMEOUT_S = 30.0  # the first line (ready) of a new session
_CLOSE_WAIT_S = 2.0


class AgentSession:
    """A `--serve` agent process, started on the first call; see the module docstring."""

    def __init__(
        self, argv: Sequence[str], clock: Clock | None = None, *, sha256: str | None = None
    ) -> None:
        """`sha256`: the zip the caller expects; a session whose agent runs another never takes
        a call (the one-shot path replaces the zip)."""
        self.argv = [*argv, "--serve"]
        self._sha256 = sha256
        self._clock = clock or SystemClock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buf = bytearray()
        self._started_with: tuple[dict[str, str], str] | None = None
        self._busy = threading.Lock()

    def call(
        self, request: str, timeout: float, reply_id: str | None = None
    ) -> CommandResult | None:
        """The agent's reply to `request` as a one-shot call's result, or None when the session
        could not take it and nothing ran (the caller then makes a one-shot call). A call made
        while another thread's is in flight gets None too: one line at a time. `reply_id`: the
        request's id; a line without it ends the session (it is returned for the caller to
        judge)."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            return self._call(request, timeout, reply_id)
        finally:
            self._busy.release()

    def _call(self, request: str, timeout: float, reply_id: str | None) -> CommandResult | None:
        if not self._ready():
            return None
        assert self._proc is not None and self._proc.stdin is not None
        t0 = self._clock.monotonic()
        try:
            self._proc.stdin.write(request.encode("utf-8", "surrogateescape") + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:  # gone before this request reached it: nothing ran
            self._kill()
            return None
        except BaseException:  # interrupted mid-line: the session cannot be trusted with more
            self._kill()
            raise
        try:
            line = self._read_line(t0 + timeout)
        except BaseException:
            # Interrupted: the agent is in a session of its own, so the terminal's signal never
            # reached it; without this it would run on (a readiness wait) as an orphan.
            self._kill()
            raise
        if line is None:  # timed out: as LocalExecutor.run, the whole group goes
            self._kill()
            return self._result("", "", -1, t0, timed_out=True)
        if not line:  # died during the call: what it printed, as a one-shot crash
            code, err = self._ended()
            return self._result("", err, code or -1, t0)
        return self._reply(line.decode("utf-8", "surrogateescape"), reply_id, t0)

    def _ready(self) -> bool:
        """A session able to take the next call: started, or replaced when it is not fit."""
        if self._proc is not None and self._started_with != _surroundings():
            self.close()
        if self._proc is not None and self._said_unasked():
            self._kill()  # its next line would be taken for this call's reply
        return self._proc is not None or self._start()

    def _reply(self, text: str, reply_id: str | None, t0: float) -> CommandResult | None:
        reply = _json_object(text)
        if reply.get("kind") == "session_stale" and reply.get("id") == reply_id:
            self.close()
            return None
        if reply_id is not None and reply.get("id") != reply_id:
            self._kill()  # not this call's reply: nothing more read from it can be matched
        return self._result(text, "", 0, t0)

    def close(self) -> None:
        """End the session: EOF on its stdin, then SIGKILL to its group if it lingers."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(timeout=_CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._buf = bytearray()

    # -- the process -------------------------------------------------------------------------

    def _start(self) -> bool:
        # The session's stderr, read only when it dies: a file never fills as a pipe would.
        self._stderr = tempfile.TemporaryFile(prefix="dsv4ops-agent-session-")  # noqa: SIM115
        surroundings = _surroundings()
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError:
            self.close()
            return False
        self._started_with = surroundings
        try:
            ready = self._read_line(self._clock.monotonic() + _START_TIMEOUT_S)
        except BaseException:
            self._kill()
            raise
        said = _json_object((ready or b"").decode("utf-8", "surrogateescape"))
        ok = said.get("ready") is True and self._sha256 in (None, said.get("sha256"))
        if not ok:  # no python, no zip, a damaged or another one: the one-shot path says which
            self._kill()
        return ok

    def _read_line(self, deadline: float) -> bytes | None:
        """The next line from the agent; b"" at EOF, None at the deadline."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        # Only the new bytes are searched and the buffer grows in place: a reply of 3 scrapes
        # of up to 8 MiB each (watch's cap) read 64 KiB at a time took 10 s rescanned and copied.
        searched = 0
        while (end := self._buf.find(b"\n", searched)) < 0:
            searched = len(self._buf)
            left = deadline - self._clock.monotonic()
            if left <= 0:
                return None
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b""
            self._buf += chunk
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line

    def _said_unasked(self) -> bool:
        """Whether the agent wrote anything (or closed its stdout) since its last reply."""
        assert self._proc is not None and self._proc.stdout is not None
        if self._buf:
            return True
        readable, _, _ = select.select([self._proc.stdout.fileno()], [], [], 0)
        return bool(readable)

    def _ended(self) -> tuple[int, str]:
        """Exit code and stderr of a session that closed its stdout."""
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=_CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill_group(self._proc.pid)
            code = self._proc.wait()
        err = b""
        if self._stderr is not None:
            self._stderr.seek(0)
            err = self._stderr.read()
        self.close()
        return code, err.decode("utf-8", "replace")

    def _kill(self) -> None:
        if self._proc is not None:
            _kill_group(self._proc.pid)
        self.close()

    def _result(
        self, out: str, err: str, code: int, t0: float, *, timed_out: bool = False
    ) -> CommandResult:
        return CommandResult(
            argv=tuple(self.argv),
            exit_code=code,
            stdout=out,
            stderr=err,
            duration_s=self._clock.monotonic() - t0,
            timed_out=timed_out,
        )


def _json_object(text: str) -> dict[str, object]:
    """`text` as a JSON object; {} for anything else."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _surroundings() -> tuple[dict[str, str], str]:
    """What a one-shot agent inherits from its caller and a session must not hold stale."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    return dict(os.environ), cwd


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
