"""A target python that puts something on the agent's wire: `remote_wire_tamper.py ARGS...` runs
`python ARGS...` (this interpreter); for an agent call (`-I -S .../agent.zip [--serve]`) it sits
between the caller and the real agent, and passes every request and reply on.

While the file DSV4OPS_TEST_WIRE_TAMPER names exists, it says what to put on the wire, as JSON:
{"op": the request op to tamper with, "name": its `name` argument (null: any), "to": "stdout"
(the line goes to the caller ahead of the reply) or "stdin" (the line goes to the agent ahead
of the request), "line": the line, "once": a file created on the first tampering (later
requests pass untouched; the file says it happened)}. A file, not the variable's value: an
agent started over SSH sees sshd's environment, not the test's. The line is written before the
request reaches the agent, so it is always ahead of the reply: no timing decides the outcome.
Used through testing/remote.py `tampering_python` and `tamper_once`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from typing import IO

ENV = "DSV4OPS_TEST_WIRE_TAMPER"


def _is_agent_call(args: list[str]) -> bool:
    return args[:2] == ["-I", "-S"] and len(args) >= 3 and args[2].endswith("/agent.zip")


def _tampering(request: bytes) -> tuple[bytes, str] | None:
    """The line to put on the wire for `request` and where ("stdout" or "stdin"); None: pass
    the request untouched."""
    try:
        with open(os.environ[ENV]) as f:
            cfg = json.load(f)
    except (KeyError, OSError, ValueError):
        return None
    return (str(cfg["line"]).encode() + b"\n", cfg["to"]) if _fires(cfg, request) else None


def _fires(cfg: dict[str, str], request: bytes) -> bool:
    """Whether `request` is the one to tamper with (and this is the first time)."""
    try:
        req = json.loads(request)
    except ValueError:
        return False
    if not isinstance(req, dict) or req.get("op") != cfg["op"]:
        return False
    if cfg.get("name") is not None and req.get("name") != cfg["name"]:
        return False
    try:
        os.close(os.open(cfg["once"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _replies(child: subprocess.Popen[bytes], out: IO[bytes], lock: threading.Lock) -> None:
    """The agent's lines to the caller; when the agent ends, so does this process (as the
    agent's own stdout would close: a session that never started must not wait for it)."""
    assert child.stdout is not None
    for line in iter(child.stdout.readline, b""):
        with lock:
            out.write(line)
            out.flush()
    os._exit(child.wait())


def _session(argv: list[str]) -> int:
    """A `--serve` agent: requests line by line, each checked before it is passed on."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    out, lock = sys.stdout.buffer, threading.Lock()
    threading.Thread(target=_replies, args=(child, out, lock), daemon=True).start()
    for request in iter(sys.stdin.buffer.readline, b""):
        tamper = _tampering(request)
        if tamper is not None and tamper[1] == "stdout":
            with lock:
                out.write(tamper[0])
                out.flush()
        try:
            if tamper is not None and tamper[1] == "stdin":
                child.stdin.write(tamper[0])
            child.stdin.write(request)
            child.stdin.flush()
        except BrokenPipeError:  # the agent ended: its replies' thread ends this process
            break
    with contextlib.suppress(BrokenPipeError):
        child.stdin.close()
    child.wait()
    threading.Event().wait()  # until the replies are passed on (their thread exits)
    return 0


def _one_shot(argv: list[str]) -> int:
    """A one-shot agent: the whole of stdin is the request."""
    request = sys.stdin.buffer.read()
    tamper = _tampering(request)
    if tamper is not None and tamper[1] == "stdout":
        sys.stdout.buffer.write(tamper[0])
        sys.stdout.buffer.flush()
    elif tamper is not None:
        request = tamper[0] + request
    return subprocess.run(argv, input=request, check=False).returncode


def main() -> int:
    args = sys.argv[1:]
    argv = [sys.executable, *args]
    if not _is_agent_call(args):
        os.execv(sys.executable, argv)
    return _session(argv) if args[3:] == ["--serve"] else _one_shot(argv)


if __name__ == "__main__":
    sys.exit(main())
