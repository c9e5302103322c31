"""One agent call (`python3 -I -S agent.zip`, the unit of every deploy step and status probe) with
and without its compiled copy (`.dsv4ops/agent-bytecode/`, see dsv4ops/remote/agent/__main__.py),
as ratios to a bare `python -I -S -c pass`, measured side by side.

    .venv/bin/python benchmarks/agent_call.py [--reps N]

Three work directories hold the same zip: one with its compiled copy, one where the copy cannot
be written (a plain file stands where its folder would go: the read-only case, which compiles
from the zip every call, as every call did before the copy), and the bare interpreter. Each
repetition runs the three back to back (interleaved), so machine load hits them alike; the
medians of wall time and of the child's CPU (user + system) are compared.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsv4ops.remote.agent_zip import agent_sha256, agent_zip  # noqa: E402


def _once(argv: list[str], stdin: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True, timeout=60)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if stdin and not json.loads(out.stdout)["ok"]:
        raise SystemExit(f"agent call failed: {out.stdout}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--python", default="python3", help="the target's python (default python3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-call-") as tmp:
        cases: dict[str, tuple[list[str], str]] = {}
        for name in ("compiled copy", "from the zip"):
            root = Path(tmp) / name.replace(" ", "-")
            (root / ".dsv4ops").mkdir(parents=True)
            zip_path = root / ".dsv4ops" / "agent.zip"
            zip_path.write_bytes(agent_zip())
            if name == "from the zip":
                (root / ".dsv4ops" / "agent-bytecode").write_text("not a folder\n")
            request = json.dumps(
                {
                    "op": "status",
                    "names": ["x"],
                    "workdir": str(root),
                    "agent_sha256": agent_sha256(),
                }
            )
            cases[name] = ([args.python, "-I", "-S", str(zip_path)], request)
        cases["python -I -S -c pass"] = ([args.python, "-I", "-S", "-c", "pass"], "")
        for argv, stdin in cases.values():  # warm the page cache; writes the compiled copy
            _once(argv, stdin)
        walls: dict[str, list[float]] = {n: [] for n in cases}
        cpus: dict[str, list[float]] = {n: [] for n in cases}
        for _ in range(args.reps):
            for name, (argv, stdin) in cases.items():
                wall, cpu = _once(argv, stdin)
                walls[name].append(wall)
                cpus[name].append(cpu)
    base_wall = statistics.median(walls["python -I -S -c pass"])
    base_cpu = statistics.median(cpus["python -I -S -c pass"])
    print(f"{args.reps} interleaved repetitions of `status` (python: {args.python})")
    print(f"{'case':22s} {'wall ms':>8s} {'x bare':>7s} {'cpu ms':>7s} {'x bare':>7s}")
    for name in cases:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(
            f"{name:22s} {wall * 1e3:8.1f} {wall / base_wall:7.2f} "
            f"{cpu * 1e3:7.1f} {cpu / base_cpu:7.2f}"
        )
    w = statistics.median(walls["from the zip"]) / statistics.median(walls["compiled copy"])
    c = statistics.median(cpus["from the zip"]) / statistics.median(cpus["compiled copy"])
    print(f"from the zip / compiled copy: wall {w:.2f}x, cpu {c:.2f}x")


if __name__ == "__main__":
    main()
