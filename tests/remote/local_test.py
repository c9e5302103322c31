from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsv4ops.errors import RemoteCommandError, TargetError
from dsv4ops.remote import LocalExecutor
from dsv4ops.remote.base import CommandResult

# Values that would run code if they ever reached a shell.
HOSTILE = ["a b", "x; touch {f}", "$(touch {f})", "`touch {f}`", "| touch {f}", "&& touch {f}"]


def test_hostile_values_stay_single_arguments(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    args = [v.format(f=marker) for v in HOSTILE]
    res = LocalExecutor().run(
        [sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *args]
    )
    assert res.stdout.strip() == json.dumps(args)
    assert not marker.exists()


def test_env_cwd_and_stdin_reach_the_command(tmp_path: Path) -> None:
    code = "import os, sys; print(os.environ['GREETING'], os.getcwd(), sys.stdin.read())"
    res = LocalExecutor().run(
        [sys.executable, "-c", code], env={"GREETING": "hi there"}, cwd=str(tmp_path), stdin="in"
    )
    assert res.stdout.split() == ["hi", "there", str(tmp_path), "in"]
    assert res.ok and res.host == "localhost"


def test_nonzero_exit_raises_with_result_and_both_streams() -> None:
    code = "import sys; print('out-line'); print('err-line', file=sys.stderr); sys.exit(4)"
    with pytest.raises(RemoteCommandError) as info:
        LocalExecutor().run([sys.executable, "-c", code])
    assert "exited 4" in str(info.value) and "err-line" in str(info.value)
    result = info.value.result
    assert isinstance(result, CommandResult)
    assert result.exit_code == 4 and "out-line" in result.stdout
    assert "exit code: 4" in result.describe()


def test_check_false_returns_failed_result() -> None:
    res = LocalExecutor().run([sys.executable, "-c", "raise SystemExit(2)"], check=False)
    assert not res.ok and res.exit_code == 2


def test_timeout_is_reported_not_hung() -> None:
    res = LocalExecutor().run(
        [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5, check=False
    )
    assert res.timed_out and not res.ok and res.duration_s < 10


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (PID 1 here does not reap orphans)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_timeout_kills_what_the_command_spawned() -> None:
    """A timed-out command's children go with it (no orphan left polling or holding a port)."""
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    res = LocalExecutor().run([sys.executable, "-c", script], timeout=1.0, check=False)
    assert res.timed_out
    child = int(res.stdout.split()[0])
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the command's child outlived the timeout"


def test_missing_program_is_exit_127() -> None:
    res = LocalExecutor().run(["/nonexistent/dsv4ops-no-such-binary"], check=False)
    assert res.exit_code == 127


def test_missing_cwd_is_target_error(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        LocalExecutor().run(["true"], cwd=str(tmp_path / "nope"))


def test_secrets_never_appear_in_results_or_errors() -> None:
    secret = "s3cr3t-value-123"
    code = "import os, sys; print(os.environ['HF_TOKEN']); print(os.environ['HF_TOKEN'], file=sys.stderr); sys.exit(1)"
    with pytest.raises(RemoteCommandError) as info:
        LocalExecutor().run(
            [sys.executable, "-c", code, "--api-key", secret], env={"HF_TOKEN": secret}
        )
    result = info.value.result
    assert isinstance(result, CommandResult)
    texts = [
        str(info.value),
        result.describe(),
        result.stdout,
        result.stderr,
        " ".join(result.argv),
    ]
    assert all(secret not in t for t in texts)
    assert "***" in result.stdout and "--api-key" in result.argv


def test_put_and_get_copy_files(tmp_path: Path) -> None:
    src = tmp_path / "a.txt"
    src.write_text("payload")
    ex = LocalExecutor()
    ex.put(src, str(tmp_path / "deep" / "dir" / "b.txt"))
    ex.get(str(tmp_path / "deep" / "dir" / "b.txt"), tmp_path / "c.txt")
    assert (tmp_path / "c.txt").read_text() == "payload"
    with pytest.raises(TargetError):
        ex.get(str(tmp_path / "missing"), tmp_path / "d.txt")


def test_an_interrupt_kills_the_running_command_and_what_it_spawned(tmp_path: Path) -> None:
    """Ctrl-C (or SIGTERM) to the CLI while a command runs: the command runs in a session of its
    own, so the signal never reaches it; the executor must end it rather than leave it polling
    on to its own timeout (issue 11 item 3: an interrupted deploy's readiness wait)."""
    pids = tmp_path / "pids"
    inner = tmp_path / "inner.py"
    inner.write_text(
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(60)\n"
    )
    cli = (
        "import signal, sys\n"
        "from dsv4ops.remote.local import LocalExecutor\n"
        "signal.signal(signal.SIGTERM, signal.default_int_handler)\n"
        "try:\n"
        f"    LocalExecutor().run([sys.executable, {str(inner)!r}], timeout=120)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", cli])
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pids.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_a_group_signal_while_a_command_starts_never_kills_the_command() -> None:
    """The terminal's Ctrl-C goes to the CLI's process group. A command started just then must
    still run: a vfork'd child unblocks signals before its setsid() and died of the group's
    SIGINT (exit -2), so an interrupted deploy reported its journal append as failed instead of
    the interrupt (CI of stop 29). The CLI here takes the signals itself and goes on."""
    cli = (
        "import collections, os, signal, threading, time\n"
        "from dsv4ops.remote.local import LocalExecutor\n"
        "signal.signal(signal.SIGINT, lambda *_: None)\n"
        "stop = threading.Event()\n"
        "def ctrl_c():\n"
        "    while not stop.is_set():\n"
        "        os.killpg(os.getpgrp(), signal.SIGINT)\n"
        "        time.sleep(0.0002)\n"
        "t = threading.Thread(target=ctrl_c)\n"
        "t.start()\n"
        "codes = collections.Counter()\n"
        "for _ in range(200):\n"
        "    codes[LocalExecutor().run(['true'], timeout=30, check=False).exit_code] += 1\n"
        "stop.set()\n"
        "t.join()\n"
        "print(dict(codes))\n"
    )
    # Its own session: the group it signals is its own, never the test run's.
    out = subprocess.run(
        [sys.executable, "-c", cli],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{0: 200}", out.stdout


def test_a_copy_that_fills_the_disk_is_removed_and_fails_as_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import shutil

    from dsv4ops import exitcodes
    from dsv4ops.errors import DiskFullError

    def half_then_full(src: str, dst: str) -> None:
        Path(dst).write_bytes(Path(src).read_bytes()[:10])
        raise OSError(errno.ENOSPC, "No space left on device", dst)

    monkeypatch.setattr(shutil, "copyfile", half_then_full)
    src = tmp_path / "agent.zip"
    src.write_bytes(b"x" * 100)
    dest = tmp_path / "work" / "agent.zip.tmp.1"
    with pytest.raises(DiskFullError) as caught:
        LocalExecutor().put(src, str(dest))
    assert caught.value.exit_code == exitcodes.FAILED
    assert "No space left on device; its partial copy was removed" in str(caught.value)
    assert caught.value.hint and "free space" in caught.value.hint
    assert not dest.exists()
