"""CLI start-up time as a ratio to a bare `python -c pass`, measured side by side.

    .venv/bin/python benchmarks/cli_startup.py [--reps N]

Each repetition runs the baseline and every command back to back (interleaved), so machine load
hits all of them alike; the medians are compared.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "dsv4ops --help": [sys.executable, "-m", "dsv4ops", "--help"],
    "dsv4ops profile render baseline": [
        sys.executable,
        "-m",
        "dsv4ops",
        "profile",
        "render",
        "baseline",
    ],
    "dsv4ops profile render baseline --json": [
        sys.executable,
        "-m",
        "dsv4ops",
        "profile",
        "render",
        "baseline",
        "--json",
    ],
}


def _once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=60
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=9)
    reps = parser.parse_args().reps
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for argv in CASES.values():  # warm the page cache once
        _once(argv)
    for _ in range(reps):
        for name, argv in CASES.items():
            times[name].append(_once(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':42} {'median ms':>10} {'ratio':>7}")
    for name, samples in times.items():
        med = statistics.median(samples)
        print(f"{name:42} {med * 1000:10.1f} {med / base:7.2f}x")


if __name__ == "__main__":
    main()
