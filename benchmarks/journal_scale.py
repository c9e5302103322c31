# ruff: noqa: T201
"""How the journal's commands scale with its size (issue 21: a 10^6-record journal of record).

Builds a journal of N records (deploys of 12 records each: begin, status, steps, transitions, as
a real deploy writes them) straight into a file, then times, side by side in one run:

  * the full scan every read did before the index (parse, validate, fold, place, judge) against
    a cold process reading through the index (journal/index.py): the last 20 operations, the
    known-good judgement, in_flight, deployed, get(newest) — what status, journal, rollback and
    deploy's known-good lookup ask;
  * the one-time index build (the first read of a journal without its index);
  * a deploy's journal traffic (12 appends) and a cold read after it (the index + its tail);
  * the agent side: what the target's `journal_read` reads for a current cache, before (read and
    hash the whole record) and now (`journalfile.read_since`: one 64 KiB window).

Usage: python benchmarks/journal_scale.py [--records N] [--keep DIR]
Reference numbers (the shared 2-core machine): docs/deploy.md, "The index (10^6 records)".
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
from dsv4ops.journal import knowngood  # noqa: E402
from dsv4ops.journal.records import (  # noqa: E402
    RECORD_VERSION,
    Kind,
    Status,
    fold,
    place_merged,
    validate,
)
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


def full_scan(path: Path) -> object:
    """What every read did before the index (journal/memo.py's cold read)."""
    parsed, _ = journalfile.parse(path.read_bytes())
    records = [validate(r, "bench") for _, r in parsed]
    ops = place_merged(fold(records), records)
    return knowngood.judge(ops), knowngood.known_good(ops)[:1], ops[-20:]


def cold_reads(directory: Path) -> object:
    """A fresh process's reads for `status` + `journal` + rollback's and deploy's lookups: the
    last 20 operations, the judgement, the known-good list's head, in-flight, deployed, one
    operation by id, and a walk for a profile no deploy has (deploy's switch cost: a miss)."""
    j = Journal("box", directory=directory)
    ops = j.operations()
    miss = ops.newest_first(
        kinds=(Kind.DEPLOY, Kind.ROLLBACK), status=Status.SUCCEEDED, profile={"name": "nope"}
    )
    return (
        ops[-20:],
        j.judged(),
        j.known_good()[:3],
        j.last_known_good(),
        j.in_flight(),
        j.deployed(),
        j.get(ops[-1].op),
        next(iter(miss), None),
    )


def ratio(label: str, before: float, after: float) -> None:
    print(
        f"{label:<48} {before * 1000:10.1f} ms -> {after * 1000:8.1f} ms  (x{before / max(after, 1e-9):.0f})"
    )


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
        timed(
            "index build (first read, no index file)",
            lambda: Journal("box", directory=root / "journal").operations(),
        )
        timed(
            "first judgement (full, writes the checkpoint)",
            lambda: Journal("box", directory=root / "journal").judged(),
        )
        cold = timed("cold reads through the index", lambda: cold_reads(root / "journal"))
        ratio("status/journal/known-good: full scan vs index", scan, cold)
        j = Journal("box", directory=root / "journal")
        timed("a deploy's journal traffic (12 appends)", lambda: deploy_traffic(j))
        after = timed("cold reads after it (index + tail)", lambda: cold_reads(root / "journal"))
        ratio("  the same, after the deploy", scan, after)
        warm = timed("the next deploy's 12 appends (index in memory)", lambda: deploy_traffic(j))
        print(f"{'  per append (each fsynced)':<48} {warm / PER_DEPLOY * 1000:10.1f} ms")
        state = j._index.current()[0]
        timed("the index file written (every 256 KiB appended)", lambda: j._index.keep(state))
        print(f"{'  its size':<48} {Path(f'{path}.idx').stat().st_size / 1e6:10.1f} MB")
        whole = timed(
            "agent before: read + hash the whole record",
            lambda: journalfile.sha256(journalfile.read_bytes(str(path))),
        )
        n, window = journalfile.proof(str(path))
        since = timed(
            "agent now: read_since a current cache",
            lambda: journalfile.read_since(str(path), n, window),
        )
        ratio("agent journal_read: whole vs window", whole, since)


if __name__ == "__main__":
    main()
