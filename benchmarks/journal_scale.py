# ruff: noqa: T201
"""How the journal's commands scale with its size (issue 21: a 10^6-record journal of record).

Builds a journal of N records (deploys of 12 records each: begin, status, steps, transitions, as
a real deploy writes them) straight into a file, then times what the commands do with it:

  * `Journal.records()` / `operations()` (status, journal, rollback read these),
  * `in_flight()`, `deployed()`, `last_known_good()`, `get(op)` of the newest operation,
  * a deploy's journal traffic: begin + 8 steps + 3 transitions, each transition looking its
    operation up first (the pattern that made it O(N) per record),
  * the agent side: `journal_read` of a cache that is current (offset + prefix hash).

Usage: python benchmarks/journal_scale.py [--records N] [--keep DIR]
Reference (this machine, 2 shared cores): see docs/journal notes in CHANGELOG (issue 21).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsv4ops import journalfile  # noqa: E402
from dsv4ops.journal.records import RECORD_VERSION, Kind, Status  # noqa: E402
from dsv4ops.journal.store import Journal  # noqa: E402

PER_DEPLOY = 12


def build(path: Path, records: int) -> None:
    """N records of whole deploys, written in large chunks (not through the API: speed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(0)
        chunk: list[bytes] = []
        for i in range(records // PER_DEPLOY):
            op = f"d-20261201T{i:09d}-beef"
            ts = "2026-12-01T00:00:00.000Z"
            base = {"v": RECORD_VERSION, "ts": ts, "op": op}
            recs = [
                {**base, "type": "begin", "kind": "deploy", "user": "bench@host", "reason": None,
                 "profile": {"name": "baseline", "commands_hash": "x" * 64}, "components": [],
                 "undo": None},
                {**base, "type": "status", "status": "PENDING"},
                {**base, "type": "status", "status": "RUNNING"},
            ]
            for step in ("preflight", "drain", "stop router", "stop decode", "start prefill",
                         "start decode", "start router", "probe"):
                recs.append({**base, "type": "step", "name": step, "phase": "done",
                             "duration_s": 0.1})
            recs.append({**base, "type": "status", "status": "SUCCEEDED", "running": op,
                         "known_good": True})
            chunk += [journalfile.encode(r) for r in recs]
            if len(chunk) > 50_000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    path.chmod(0o600)


def timed(label: str, fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    print(f"{label:<48} {dt * 1000:10.1f} ms")
    return dt


def deploy_traffic(j: Journal) -> None:
    op = j.begin(Kind.DEPLOY, profile={"name": "bench"})
    j.transition(op, Status.RUNNING)
    for step in ("preflight", "drain", "stop router", "stop decode"):
        j.step(op, step, "start")
        j.step(op, step, "done", duration_s=0.1)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        path = root / "journal" / "box.jsonl"
        t0 = time.perf_counter()
        build(path, args.records)
        size = path.stat().st_size
        print(f"built {args.records} records ({size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s")
        j = Journal("box", directory=root / "journal")
        timed("records() (cold)", j.records)
        timed("operations()", j.operations)
        timed("in_flight()", j.in_flight)
        timed("deployed()", j.deployed)
        timed("last_known_good()", j.last_known_good)
        newest = j.operations()[-1].op
        timed("get(newest)", lambda: j.get(newest))
        timed("a deploy's journal traffic (12 appends)", lambda: deploy_traffic(j))
        data = journalfile.read_bytes(str(path))
        digest = journalfile.sha256(data)
        timed("agent: tail_after a current cache", lambda: journalfile.tail_after(data, len(data), digest))
        timed("fresh Journal: status's reads (records+ops)", lambda: Journal(
            "box", directory=root / "journal").operations())


if __name__ == "__main__":
    main()
