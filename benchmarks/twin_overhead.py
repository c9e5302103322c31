"""The twin's own overhead: does one decode process on one core keep the modelled step time?

Starts a lone twin decode pinned to CPU 0 (`taskset -c 0`) at time scale 1.0, holds N concurrent
*streaming* requests on it (N-1 background streams plus one timed probe stream; the client runs
in this process, pinned to another CPU when there is one), and prints, side by side, the modelled
step, the step measured from the probe's token arrivals, their ratio, and the decode's CPU use.
The target (issue 3): ratio within 2% of 1.00 at 128 streams.

    .venv/bin/python benchmarks/twin_overhead.py [--streams 32 128] [--tokens 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsv4ops.twin.perf import default_decode_buckets, padded_batch  # noqa: E402
from testing.twin import measure_step_ms, twin_server  # noqa: E402

A_MS, B_MS = 18.0, 1.05


def _cpu_seconds(pid: int | None) -> float:
    assert pid is not None, "the twin server has no pid (not started?)"
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--tokens", type=int, default=60, help="probe tokens per measurement")
    opts = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, set(cpus[1:]))  # keep the client off the decode's core
    prefix = ["taskset", "-c", str(cpus[0])] if shutil.which("taskset") else []
    env = {"DSV4_TWIN_TIME_SCALE": "1.0", "DSV4_TWIN_HAZARDS": "off"}
    buckets = default_decode_buckets(256)
    rows = []
    with twin_server(
        [
            "--disaggregation-mode",
            "decode",
            "--disable-overlap-schedule",
            "--max-running-requests",
            "256",
        ],
        env=env,
        launcher_prefix=prefix,
    ) as proc:
        for n in opts.streams:
            modelled = A_MS + B_MS * padded_batch(n, buckets)
            cpu0, t0 = _cpu_seconds(proc.pid), time.monotonic()
            measured = asyncio.run(
                measure_step_ms(
                    proc.url, n, probe_tokens=opts.tokens, time_scale=1.0, stream_background=True
                )
            )
            cpu = (_cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
            rows.append((n, modelled, measured, measured / modelled, cpu))
    pinned = f"CPU {cpus[0]}" if prefix else "unpinned (no taskset)"
    print(f"twin decode overhead: one process, {pinned}, streaming clients, scale 1.0")
    print(f"{'streams':>8} {'modelled ms':>12} {'measured ms':>12} {'ratio':>7} {'decode CPU':>11}")
    for n, modelled, measured, ratio, cpu in rows:
        print(f"{n:>8} {modelled:>12.2f} {measured:>12.2f} {ratio:>7.4f} {cpu:>10.0%}")
    worst = max(abs(r[3] - 1) for r in rows)
    print(f"worst |ratio - 1| = {worst:.2%} (target <= 2%)")
    return 0 if worst <= 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
