"""The JSONL event log (DSV4_TWIN_EVENT_LOG): one line per lifecycle event.

Opened with O_APPEND and written with one write() per line, so a prefill and a decode can share
one file without interleaving lines.
"""

from __future__ import annotations

import json
import os
import time

from dsv4ops.jsontypes import JSONObject


class EventLog:
    def __init__(self, path: str | None, *, role: str, port: int, instance_id: str) -> None:
        self._path = path
        self._role = role
        self._port = port
        self._instance_id = instance_id

    def emit(self, event: str, **details: object) -> None:
        """Append one event; a no-op without a configured path."""
        if not self._path:
            return
        record = {
            "ts": time.time(),
            "pid": os.getpid(),
            "role": self._role,
            "port": self._port,
            "instance_id": self._instance_id,
            "event": event,
            **details,
        }
        line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read_events(path: str) -> list[JSONObject]:
    """All events of a log file, in order (for tests and tools)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
