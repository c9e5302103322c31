"""Test helpers and doubles for `dsv4ops.cli` (one module per package area).

- process: Run `python -m dsv4ops ...` as a real process with a time and memory ceiling.
- terminal: hostile text (ESC, BEL) and the check that a command printed none of it raw.
- read_until: a running command's output up to a line it prints (a bound on a hang).
- wait_blocked: until a process sleeps in a system call (its prompt's read), before a signal.
"""

from __future__ import annotations

import os
import resource
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# --- process (was testing/cli.py) ---

REPO = Path(__file__).resolve().parents[1]

# Far above what any command needs on a profile (about 60 MB), far below what an unbounded alias
# expansion reaches (5 GB after 40 s on the alias bomb of issue 11).
MEMORY_CEILING_BYTES = 1024 * 2**20
# Generous for a loaded 2-core CI machine: a profile command takes well under a second.
TIME_CEILING_S = 60


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING_BYTES, MEMORY_CEILING_BYTES))


def run_cli(*args: str, profiles_dir: Path, cwd: Path | None = None) -> Run:
    """The real CLI process; fails the test (TimeoutExpired) if it runs past TIME_CEILING_S."""
    env = {**os.environ, "DSV4OPS_PROFILES_DIR": str(profiles_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or profiles_dir.parent,
        timeout=TIME_CEILING_S,
        preexec_fn=_limit_memory,  # noqa: PLW1509 - no threads in the test process at this point
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


# --- terminal ---


def run_in_pty(
    argv: list[str], *, env: dict[str, str], cwd: Path, timeout_s: float = 120.0, columns: int = 200
) -> tuple[int, str]:
    """Run `argv` with stdin, stdout and stderr on a pseudo-terminal, as a user at a terminal
    would; returns (exit code, everything it wrote, escape sequences included). Bounded: the
    process group is killed past `timeout_s` and the test fails."""
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env={**env, "TERM": "xterm-256color", "COLUMNS": str(columns)},
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(
                    f"{argv} ran past {timeout_s}s:\n"
                    + b"".join(chunks).decode(errors="replace")[-3000:]
                )
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal closed it
                    data = b""
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


# --- terminal ---

EVIL = "evil\x1b[2J\x07"  # clears the screen and rings the bell when printed raw
SHOWN = "evil\\x1b[2J\\x07"  # what the operator sees instead (cli/_output.py terminal_safe)


def printable(capsys: pytest.CaptureFixture[str]) -> str:
    """Both streams since the last read, checked to hold no control character but line breaks
    and no traceback."""
    out, err = capsys.readouterr()
    both = out + err
    assert "Traceback" not in both and all(c.isprintable() for c in both.replace("\n", "")), both
    return both


def read_until(proc: subprocess.Popen[Any], text: str, within_s: float = 60.0) -> str:
    """The process's output up to and including `text` (read from its pipe as it comes, so
    `communicate` later returns the rest); fails if it ends or `within_s` passes first (a bound
    on a hang, not a guess at when it is ready)."""
    assert proc.stdout is not None
    fd, seen = proc.stdout.fileno(), b""
    deadline = time.monotonic() + within_s
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {within_s} s: {seen.decode(errors='replace')}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"it ended before {text!r}: {seen.decode(errors='replace')}"
            seen += chunk
    return seen.decode()


def wait_blocked(pid: int, within_s: float = 30.0) -> None:
    """Until the process's main thread sleeps in a system call (/proc/PID/stat state S): after
    a prompt is written, that is the read of its answer. A signal that lands between the prompt's
    write and that read runs CPython's C handler (a flag) but interrupts no read, and the read
    then blocks for good: a full run saw a runbook hang 60 s after SIGTERM at its prompt so.
    Fails if `within_s` passes first."""
    deadline = time.monotonic() + within_s
    while True:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state in ("S", "D"):
            return
        assert time.monotonic() < deadline, f"pid {pid} never blocked within {within_s} s: {state}"
        time.sleep(0.01)
