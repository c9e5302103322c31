"""Free-port helpers for tests that start real servers on 127.0.0.1, safe across processes.

A port handed out here is free when it is handed out, and the server that will bind it binds it
later (a twin takes a second to start). Asking the kernel for port 0 leaves that window open to
every other process on the machine: the port is free again once our probe socket closes, so a
second pytest worker (pytest-xdist runs `make test` on several) or another checkout's test run
can be handed the same port in between. So:

- each xdist worker takes ports from its own band (PYTEST_XDIST_WORKER), below the ephemeral
  range the kernel gives outgoing connections their source ports from;
- inside the band, ports go round from a random start, so two runs of the suite side by side
  (two checkouts on one machine) do not walk the same ports in step;
- a port is handed out only while this process holds an flock on its file under the temp dir,
  kept for the next RESERVED handouts: no other process using these helpers (any worker, any
  checkout) can be handed it in that window, whatever its band; the kernel drops the locks when
  the process dies, so a killed run leaves nothing to clean up;
- and, as before, only if 127.0.0.1:port can be bound now.

`reserve_ports` serves the profile port offsets of testing/orchestrate.py the same way.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import random
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

BAND_START, BAND_END = 12000, 28900  # clear of the offsets' ports (9000-11300, 30000-32301)
RESERVED = 256  # handouts a reservation outlives: far more than one test starts servers for
LOCK_DIR = Path(tempfile.gettempdir()) / "dsv4ops-test-ports"

_held: collections.deque[tuple[int, int]] = collections.deque()  # (port, lock fd), oldest first
_cursor: int | None = None
_rng = random.Random()  # its own: a test that seeds `random` does not line the runs up


def worker_index() -> tuple[int, int]:
    """(this xdist worker's index, the number of workers); (0, 1) outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0
    return index % max(count, 1), max(count, 1)


def band() -> range:
    """This worker's ports: an equal share of BAND_START..BAND_END."""
    index, count = worker_index()
    width = (BAND_END - BAND_START) // count
    return range(BAND_START + index * width, BAND_START + (index + 1) * width)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _lock(port: int) -> int | None:
    """An flock on the port's file held by this process, or None when another process holds it."""
    LOCK_DIR.mkdir(exist_ok=True)
    fd = os.open(LOCK_DIR / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _release_old(keep: int) -> None:
    while len(_held) > keep:
        _, fd = _held.popleft()
        with contextlib.suppress(OSError):
            os.close(fd)


def reserve_ports(ports: Iterable[int]) -> bool:
    """Reserve every one of `ports` (locked by no other process, bindable now), or none of them."""
    wanted = list(dict.fromkeys(ports))
    if any(p in {held for held, _ in _held} for p in wanted):
        return False
    taken: list[tuple[int, int]] = []
    for port in wanted:
        fd = _lock(port)
        if fd is not None:
            taken.append((port, fd))
        if fd is None or not _bindable(port):
            for _, held_fd in taken:
                os.close(held_fd)
            return False
    _held.extend(taken)
    _release_old(RESERVED)
    return True


def free_port() -> int:
    (port,) = free_ports(1)
    return port


def free_ports(n: int) -> list[int]:
    """n distinct ports of this worker's band, each reserved (see the module docstring)."""
    global _cursor
    ports = band()
    if _cursor is None:
        _cursor = _rng.randrange(len(ports))
    out: list[int] = []
    for _ in range(len(ports)):
        port = ports[_cursor % len(ports)]
        _cursor += 1
        if reserve_ports([port]):
            out.append(port)
            if len(out) == n:
                return out
    raise RuntimeError(f"no {n} free ports in {ports.start}-{ports.stop - 1}")
