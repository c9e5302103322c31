"""Reading a file an operator named on this machine: a regular file, read to a bound.

A path an operator names can be anything: a FIFO (opening it to read blocks until a writer
comes), /dev/zero or a device (a read never ends), or a multi-GB file given by mistake (read
whole into memory). Every reader of such a path (profiles, `buckets plan`'s inputs, `kernels
verify/deploy`'s artifact, the router's API key file, SSH's known_hosts) refuses those with one
reason, before reading more than it allows; `buckets plan` also reads a pipe (`<(command)`),
to the same bound, and known_hosts may be /dev/null (remote/ssh_trust.py).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class FileRefused(Exception):
    """The file is not read: why, in words for the operator (the caller names the file)."""


def read_regular(path: Path, limit: int, what: str, *, pipe_ok: bool = False) -> bytes:
    """At most `limit` bytes of the regular file `path`, whole. Raises FileRefused for anything
    else (not a regular file, larger than `limit`, unreadable: its OS reason); FileNotFoundError
    is left to the caller, who knows what a missing file means. `pipe_ok`: a pipe is read too,
    to its end or the bound (a shell's `<(command)` is one; a FIFO nobody writes waits for a
    writer, as `cat` does)."""
    try:
        info = path.stat()
        pipe = pipe_ok and stat.S_ISFIFO(info.st_mode)
        if not stat.S_ISREG(info.st_mode) and not pipe:
            raise FileRefused(f"cannot read {what}: not a regular file")
        if info.st_size > limit:
            raise FileRefused(too_big(what, info.st_size, limit))
        # O_NONBLOCK: a FIFO swapped in after the stat does not block the open
        fd = os.open(path, os.O_RDONLY | (0 if pipe else os.O_NONBLOCK))
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise FileRefused(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:  # it grew since the stat
        raise FileRefused(too_big(what, len(data), limit))
    return data


def too_big(what: str, size: int, limit: int) -> str:
    return f"the {what} file is {size} bytes; at most {limit} are read"
