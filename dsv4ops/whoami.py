"""Who runs this CLI: the one home of the local user and host name (journal `who`, lock holders,
the default SSH user). The target agent is its own stdlib-only program and has its own copy."""

from __future__ import annotations

import getpass
import os
import socket


def local_user() -> str:
    """The login name, or the numeric uid where there is no passwd entry (containers)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def local_host() -> str:
    return socket.gethostname()


def operator_identity() -> str:
    """'user@host' of whoever runs the CLI (recorded as 'who')."""
    return f"{local_user()}@{local_host()}"
