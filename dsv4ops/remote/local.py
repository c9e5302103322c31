"""LocalExecutor: the execution seam on this machine, via subprocess with argv lists only.

Never `shell=True`: a profile value containing `;`, `$(...)` or spaces is passed to the program
as one argument and never interpreted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from dsv4ops.clock import SystemClock
from dsv4ops.errors import TargetError
from dsv4ops.remote._redact import check_result, make_result, scrub, secret_values
from dsv4ops.remote.base import CommandResult

_CLOCK = SystemClock()

# The terminal's Ctrl-C goes to the CLI's whole process group. A child made by vfork (CPython's
# default) blocks signals, resets their handlers to the default and unblocks them BEFORE its
# setsid(): a group signal sent in that window stays pending and kills it (SIGINT, exit -2)
# before it execs, although it was meant to be in a session of its own. An interrupted deploy
# then reported its journal append as failed ("agent journal_append failed (exit -2)") instead
# of the interrupt (CI of stop 29). A forked child keeps Python's handler, which only sets a
# flag, until its exec, which comes after the setsid. Documented switch: docs.python.org
# subprocess, "Disable use of vfork() or posix_spawn()"; a fork of this small CLI costs ~1 ms.
subprocess._USE_VFORK = False  # type: ignore[misc]  # typeshed: Final (the documented switch)


def _kill_group(pgid: int) -> None:
    """SIGKILL every process of the group (the command and whatever it spawned)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


class LocalExecutor:
    """Runs commands as child processes of this one (the 'target' is localhost)."""

    host = "localhost"

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
        """Run argv; raises RemoteCommandError on failure when `check`, TargetError if cwd is missing."""
        argv = [str(a) for a in argv]
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update(env)
        t0 = _CLOCK.monotonic()
        try:
            # Own session, so a timeout can kill the command's whole process group (children
            # included), as the SSH executor does on the target; components the agent detaches
            # live in sessions of their own and are not touched.
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
            try:
                out, err = proc.communicate(stdin if stdin is not None else "", timeout=timeout)
                code, timed_out = proc.returncode, False
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                out, err = proc.communicate()
                code, timed_out = -1, True
            except BaseException:
                # Interrupted (Ctrl-C, SIGTERM to the CLI, the interrupt gate): the child is in
                # a session of its own, so the terminal's signal never reached it; without this
                # a readiness wait on the target would run on to its own timeout as an orphan.
                # Steps that must finish (start, stop) hold the signal and never get here.
                _kill_group(proc.pid)
                with contextlib.suppress(Exception):
                    proc.communicate(timeout=5)
                raise
        except FileNotFoundError as exc:
            if cwd and not os.path.isdir(cwd):
                raise TargetError(f"localhost: working directory {cwd} does not exist") from exc
            code, out, err, timed_out = 127, "", f"{argv[0]}: command not found", False
        except PermissionError as exc:
            code, out, err, timed_out = (
                126,
                "",
                f"{argv[0]}: {scrub(str(exc), secret_values(env))}",
                False,
            )
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
        """Copy a file to `remote` (parent directories are created). A copy that fails (a full
        disk) is removed and raises TargetError (DiskFullError): nothing half-written is left."""
        from dsv4ops.remote.errors import upload_failed

        try:
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local, remote)
        except OSError as exc:
            removed = True
            try:
                os.unlink(remote)
            except FileNotFoundError:
                pass
            except OSError:
                removed = False
            raise upload_failed(self.host, remote, exc, removed=removed) from None

    def get(self, remote: str, local: Path) -> None:
        """Copy `remote` to a local path; raises TargetError when it does not exist."""
        try:
            Path(local).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(remote, local)
        except FileNotFoundError as exc:
            raise TargetError(f"localhost: no such file {remote}") from exc

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
