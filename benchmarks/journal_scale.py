# ruff: noqa: T201
"""How the journal's commands scale with its size (issues 21, 39: a 10^6-record journal of record).

Builds a journal of N records (deploys of 12 records each: begin, status, steps, transitions, as
a real deploy writes them) straight into a file, then prints, side by side in one run, the full
scan every read did before the index (parse, type, fold, place, judge) and, each in a fresh
process's state (a new Journal: what a CLI command starts from), through the SQLite index
(journal/index.py, rows.py: its tables are the index):

  * cold `status`: in-flight, deployed, what left it unknown, the newest operation by id;
  * cold `journal`: the last 20 operations and the known-good judgement;
  * cold known-good: rollback's list head and deploy's last known-good, and a walk for a
    profile no deploy has (deploy's switch cost: a miss);
  * one append (a deploy's 12 records, each appended and fsynced, through a Journal whose cache
    is current: the per-record cost), and the cold reads right after it (the cache + its tail);
  * the one-time index build (the first read of a journal without its index, or after an
    upgrade) and a judgement of every deploy (`judged()` iterated: what no command does);
  * the agent side: what the target's `journal_read` reads for a current copy, before (read and
    hash the whole record) and now (`recordfile.read_since`: one 64 KiB window).

Usage: python benchmarks/journal_scale.py [--records N] [--keep DIR]
Reference numbers (the shared 2-core machine): docs/deploy.md, "The journal: record, index,
judge".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsv4ops.journal import recordfile  # noqa: E402
from dsv4ops.journal.records import RECORD_VERSION, Kind, Status  # noqa: E402
from dsv4ops.journal.schema import parse_record  # noqa: E402
from dsv4ops.journal.store import Journal  # noqa: E402
from testing import journal as reference  # noqa: E402  (the full scan the index answers as)

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
                {
                    **base,
                    "type": "begin",
                    "kind": "deploy",
                    "user": "bench@host",
                    "reason": None,
                    "profile": {"name": "baseline", "commands_hash": "x" * 64},
                    "components": [],
                    "undo": None,
                },
                {**base, "type": "status", "status": "PENDING"},
                {**base, "type": "status", "status": "RUNNING"},
            ]
            for step in (
                "preflight",
                "drain",
                "stop router",
                "stop decode",
                "start prefill",
                "start decode",
                "start router",
                "probe",
            ):
                recs.append(
                    {**base, "type": "step", "name": step, "phase": "done", "duration_s": 0.1}
                )
            recs.append(
                {**base, "type": "status", "status": "SUCCEEDED", "running": op, "known_good": True}
            )
            chunk += [recordfile.encode(r) for r in recs]
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


def full_scan(path: Path) -> object:
    """What every read did before the index (testing/journal.py: the index's reference)."""
    parsed, _ = recordfile.parse(path.read_bytes())
    records = [parse_record(r, "bench") for _, r in parsed]
    ops = reference.place_merged(reference.fold(records), records)
    return reference.judge(ops), reference.known_good(ops)[:1], ops[-20:]


def cold_status(directory: Path) -> object:
    """A fresh process's reads for `status`: in flight, deployed, unknown, the newest by id."""
    j = Journal("box", directory=directory)
    ops = j.operations()
    return j.in_flight(), j.deployed(), j.deployed_is_unknown(), j.get(ops[-1].op)


def cold_journal(directory: Path) -> object:
    """... for `journal`: the last 20 operations and the judgement of every deploy."""
    return Journal("box", directory=directory).listing(20)


def cold_known_good(directory: Path) -> object:
    """... for rollback's list and deploy's lookups: the known-good head, the last known-good
    and a walk back for a profile no deploy has (a miss)."""
    j = Journal("box", directory=directory)
    miss = j.operations().newest_first(
        kinds=(Kind.DEPLOY, Kind.ROLLBACK), status=Status.SUCCEEDED, profile={"name": "nope"}
    )
    return j.known_good()[:3], j.last_known_good(), next(iter(miss), None)


def row(label: str, ms: float, goal: str = "") -> None:
    print(f"{label:<52} {ms:10.1f} ms  {goal}")


def best(fn: Callable[[], object], n: int = 3) -> float:
    """The fastest of `n` runs (ms): a shared machine's noise is only ever added."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return min(times)


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
        print(
            f"built {args.records} records ({size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s"
        )
        scan = timed("full scan (the read before the index)", lambda: full_scan(path))
        jdir = root / "journal"
        timed(
            "index build (first read, no index: once)",
            lambda: Journal("box", directory=jdir).operations(),
        )
        timed(
            "every deploy judged (none does this: a bound)",
            lambda: dict(Journal("box", directory=jdir).judged()),
        )
        j = Journal("box", directory=jdir)
        deploy_traffic(j)  # a Journal whose cache is current, as a deploy's is
        t0 = time.perf_counter()
        deploy_traffic(j)
        append = (time.perf_counter() - t0) * 1000 / PER_DEPLOY
        print(f"\nat {args.records} records, side by side (best of 3; goals: issue 39):")
        row("full scan (every read before the index)", scan * 1000)
        row("cold status", best(lambda: cold_status(jdir)), "<= 200 ms")
        row("cold journal (last 20 + judgement)", best(lambda: cold_journal(jdir)), "<= 200 ms")
        row(
            "cold known-good (rollback / deploy lookups)",
            best(lambda: cold_known_good(jdir)),
            "<= 200 ms",
        )
        row("one append (a deploy's 12 records / 12, fsynced)", append, "<= 10 ms")
        mb = sum(Path(f"{path}.sqlite{s}").stat().st_size for s in ("", "-wal")) / 1e6
        print(f"{'index file (+ its WAL)':<52} {mb:10.1f} MB")
        whole = timed(
            "agent before: read + hash the whole record",
            lambda: recordfile.sha256(recordfile.read_bytes(str(path))),
        )
        n, window = recordfile.proof(str(path))
        since = timed(
            "agent now: read_since a current cache",
            lambda: recordfile.read_since(str(path), n, window),
        )
        print(f"{'  agent journal_read: whole vs window':<52} x{whole / max(since, 1e-9):.0f}")


if __name__ == "__main__":
    main()
