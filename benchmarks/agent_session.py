"""A local target's agent calls through one session (dsv4ops/remote/agent_session.py) against one
process a call, measured side by side through the Supervisor, in a caller of the size asked.

    .venv/bin/python benchmarks/agent_session.py [--reps N] [--ballast-mb M]

Two work directories hold the same agent; one Supervisor reaches the first through a plain
LocalExecutor (its calls go to a session), the other through a LocalExecutor subclass (a wrapper
keeps one process a call, as every local call was before the session). Each repetition makes one
`status` call on each, back to back (interleaved), so machine load hits them alike; the medians
of wall time are compared. `--ballast-mb` grows this process first: a one-shot call forks the
caller, and a fork costs more the more memory the caller has touched (a test worker that
collected the kernel tests holds ~380 MB; the CLI ~60 MB).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsv4ops.remote.local import LocalExecutor  # noqa: E402
from dsv4ops.remote.supervisor import Supervisor  # noqa: E402


class _OneShot(LocalExecutor):
    """A wrapper in name only: the Supervisor keeps one process a call for it."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=41)
    parser.add_argument("--ballast-mb", type=int, default=0)
    args = parser.parse_args()
    ballast = bytearray(args.ballast_mb << 20)
    for i in range(0, len(ballast), 4096):  # touched, so a fork copies its page tables
        ballast[i] = 1
    with tempfile.TemporaryDirectory(prefix="agent-session-") as tmp:
        sups = {
            "session": Supervisor(LocalExecutor(), f"{tmp}/session", python=sys.executable),
            "one process a call": Supervisor(_OneShot(), f"{tmp}/oneshot", python=sys.executable),
        }
        for sup in sups.values():  # upload, compiled copy, the session's start
            sup.status(["x"])
        walls: dict[str, list[float]] = {name: [] for name in sups}
        for _ in range(args.reps):
            for name, sup in sups.items():
                start = time.perf_counter()
                sup.status(["x"])
                walls[name].append(time.perf_counter() - start)
        for sup in sups.values():
            sup.close()
    print(f"{args.reps} interleaved `status` calls each, caller ballast {args.ballast_mb} MB")
    for name, samples in walls.items():
        print(f"{name:20s} {statistics.median(samples) * 1e3:8.2f} ms")
    ratio = statistics.median(walls["one process a call"]) / statistics.median(walls["session"])
    print(f"one process a call / session: {ratio:.1f}x")


if __name__ == "__main__":
    main()
