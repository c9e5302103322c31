"""Soak: `dsv4ops watch` against the twin behind the real router, hazards off, light load, for
an hour by default. Any finding is a false positive (the twin's hazards are off): it is printed
with its evidence and the run exits 1. A manual run, not CI.

    .venv/bin/python benchmarks/watch_soak.py [--minutes 60] [--threads 2] [--time-scale 1.0]

The twin runs at `--time-scale` (1.0: the box's timing; 0.1 replays ten times as much model
time), with watch's windows at the same scale, its probes every `--probe-every` model seconds,
and `--threads` clients streaming short chats through the router (well below the largest
decode bucket, so eager fallback would be a real finding). Bounded: everything stops at the
deadline; the stack is torn down on exit.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsv4ops.watch import Round, WatchSettings  # noqa: E402
from testing.twin import RouterTraffic, twin_stack  # noqa: E402
from testing.watch import local_watcher  # noqa: E402

BUCKETS = (1, 2, 4, 8, 16, 32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=5.0, help="model seconds between scrapes")
    ap.add_argument("--probe-every", type=float, default=30.0, help="model seconds")
    a = ap.parse_args()
    if not (0 < a.minutes <= 24 * 60 and 0 < a.time_scale <= 10 and 1 <= a.threads <= 16):
        ap.error("--minutes in (0, 1440], --time-scale in (0, 10], --threads in [1, 16]")
    env = {"DSV4_TWIN_TIME_SCALE": str(a.time_scale), "DSV4_TWIN_HAZARDS": "off"}
    decode = [
        "--enable-metrics",
        "--tool-call-parser",
        "deepseekv4",
        "--cuda-graph-bs-decode",
        *map(str, BUCKETS),
    ]
    settings = WatchSettings(
        interval_s=a.interval,
        probe_every_s=a.probe_every,
        max_decode_bucket=max(BUCKETS),
        time_scale=a.time_scale,
    )
    found: dict[str, list[str]] = collections.defaultdict(list)
    counts = collections.Counter[str]()
    deadline = time.monotonic() + a.minutes * 60
    t0 = time.monotonic()

    def emit(r: Round) -> None:
        counts["rounds"] += 1
        counts["probe rounds"] += bool(r.probes)
        counts["probes not ok"] += sum(p.status != "ok" for p in r.probes)
        for f in r.findings:
            if not found[f.code]:
                print(f"[{time.monotonic() - t0:7.1f} s] FINDING {f.line()}", flush=True)
            found[f.code].append(r.at)
        if counts["rounds"] % 100 == 0:
            print(
                f"[{time.monotonic() - t0:7.1f} s] {counts['rounds']} rounds, "
                f"{counts['probe rounds']} probe rounds, findings: {sum(map(len, found.values()))}",
                flush=True,
            )

    with (
        tempfile.TemporaryDirectory() as workdir,
        twin_stack(
            router=True, env=env, prefill_args=["--enable-metrics"], decode_args=decode
        ) as stack,
    ):
        assert stack.router is not None
        budget = int(a.minutes * 60 * a.threads * 20)  # bounded whatever the request rate
        with RouterTraffic(stack.router.url, threads=a.threads, max_requests=budget) as load:
            watcher = local_watcher(stack, workdir, settings, BUCKETS)
            watcher.run(emit, stop=lambda: time.monotonic() >= deadline)
            requests = load.completed
            errors = load.errors
    print(
        f"soak: {a.minutes:g} min at time scale {a.time_scale:g}: {counts['rounds']} rounds, "
        f"{counts['probe rounds']} probe rounds ({counts['probes not ok']} probes not ok), "
        f"{requests} background requests ({errors} errors)"
    )
    if not found:
        print("no finding")
        return 0
    for code, times in sorted(found.items()):
        print(f"FINDING {code}: {len(times)} rounds, first at {times[0]}, last at {times[-1]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
