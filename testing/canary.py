"""Test helpers and doubles for `dsv4ops.canary` (one module per package area).

- fixtures: Start `testing.programs.canary_server` in a subprocess on a free port (killed on exit).
- scripted_server: A real TCP server on 127.0.0.1 that answers each request with scripted byte pieces, each in its
own write with a pause in between (the rawhttp client tests). It counts connections, requests
and disconnects, so keep-alive reuse is observable from outside.
- verdicts: What a `canary --json` report says, read from its typed `findings` (each reason's
  kind), never from the reasons' words: `reason_kinds`, `judged_pass` (the real judges test).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx

from testing.ports import free_port

# --- fixtures (was testing/canary.py) ---

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def fake_server(config: dict[str, Any] | None = None, *, timeout_s: float = 15.0) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testing.programs.canary_server",
            "--port",
            str(port),
            "--config",
            json.dumps(config or {}),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr is not None else ""
                raise RuntimeError(f"canary_server exited: {err[-500:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("canary_server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def configure(base_url: str, **knobs: Any) -> None:
    httpx.post(base_url + "/_fake/config", json=knobs, timeout=5).raise_for_status()


# --- scripted_server (was testing/canary.py) ---

Script = Callable[[int, bytes], Sequence[bytes | float | None]]  # (request n, body) → pieces
# A piece is bytes to write, a float to sleep, or None to close the connection right there.


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.disconnects = 0
        self.port = free_port()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                for piece in self.script(len(self.requests) - 1, body):
                    if piece is None:
                        writer.close()
                        return
                    if isinstance(piece, float):
                        await asyncio.sleep(piece)
                    else:
                        writer.write(piece)
                        await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.disconnects += 1
        except RuntimeError as exc:  # uvloop: a write on the transport the client just closed
            if "closed" not in str(exc):
                raise
            self.disconnects += 1
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return f"http://127.0.0.1:{self.port}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


# --- verdicts: read from a report's typed findings ---

# The kinds (the report's `findings[].kind`, canary/verdict.py Kind) of the INCONCLUSIVE reasons
# a healthy unit may get on the real CPU server, each a measurement the judge could not trust
# (never a refusal, never a failure): the client's own event-loop lag (the real servers share two
# cores with it: canary/selfcheck.py), and a sweep whose step times on a CPU decode did not grow
# with the batch or scattered around it (issue 38, runs 2 and 4 of 4: slope -14.7 ms/request;
# R² 0.37).
MEASUREMENT_DOUBTS = frozenset({"client_lag", "no_step_law", "poor_fit"})


def reason_kinds(got: Mapping[str, Any], level: str | None = None) -> list[str]:
    """The kinds of a `canary --json` report's reasons (of one level: FAIL, INCONCLUSIVE,
    note), as its judges typed them."""
    return [f["kind"] for f in got["findings"] if level is None or f["level"] == level]


def judged_pass(got: Mapping[str, Any]) -> bool:
    """PASS; or INCONCLUSIVE for measurement doubts only (MEASUREMENT_DOUBTS)."""
    if got["verdict"] == "PASS":
        return True
    unsure = reason_kinds(got, "INCONCLUSIVE")
    return got["verdict"] == "INCONCLUSIVE" and set(unsure) <= MEASUREMENT_DOUBTS
