from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dsv4ops.twin.events import EventLog, read_events

WRITER = """
import sys
from dsv4ops.twin.events import EventLog
log = EventLog(sys.argv[1], role=sys.argv[2], port=1, instance_id=sys.argv[2])
for i in range(300):
    log.emit("tick", i=i, pad="x" * 500)
"""


def test_two_processes_append_whole_lines_to_one_log(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), role])
        for role in ("prefill", "decode")
    ]
    for p in procs:
        assert p.wait(30) == 0
    events = read_events(str(path))  # every line parses
    assert len(events) == 600
    for role in ("prefill", "decode"):
        assert [e["i"] for e in events if e["role"] == role] == list(range(300))
    assert {"ts", "pid", "role", "port", "event", "instance_id"} <= set(events[0])


def test_no_path_means_no_log(tmp_path: Path) -> None:
    EventLog(None, role="decode", port=1, instance_id="x").emit("started")
    assert list(tmp_path.iterdir()) == []
    assert read_events(str(tmp_path / "missing.jsonl")) == []
