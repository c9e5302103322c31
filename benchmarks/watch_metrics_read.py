# ruff: noqa: T201
"""What one watch read of /metrics costs on a runaway exporter (issue 40: 10^6 series on each
port, ~50 MB a scrape, which watch held whole and parsed whole: 1.2 GB RSS, 92 s a `--once`).

Real HTTP servers on 127.0.0.1 send either a real SGLang 0.5.23 decode /metrics (127 KB,
tools/sglang-cpu/observed/) or 10^6 series of one family watch never reads; side by side in one
run, each case in a fresh process (so its peak RSS is its own):

  * one read by the target agent's reader (what `http_many` runs on the target) and the reading
    watch makes of it (`server_reading`: the kept families only);
  * the same through this machine's aiohttp reader (a local or endpoint target's scrapes);
  * a body just under the cap (other series, then the real body): the most a read parses;
  * one whole watch round (`Watcher.tick`, the real local supervisor and its agent process) with
    all three ports (prefill, decode, router) sending the same body;
  * with `--before`: the old read (urllib `read()` whole, every family parsed) of one port, at
    `--before-series` (default 10^5; at 10^6 it takes minutes and over 1 GB).

Usage: python benchmarks/watch_metrics_read.py [--series N] [--before] [--before-series N]
Reference numbers (the shared 2-core machine): docs/monitoring.md, "A /metrics too large".
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES  # noqa: E402
from dsv4ops.watch.readings import ServerReading  # noqa: E402
from testing.ports import free_ports  # noqa: E402
from testing.watch import (  # noqa: E402
    OBSERVED_DECODE_METRICS,
    RUNAWAY_SERIES,
    metrics_unit,
    runaway_metrics,
)

CASES = ("agent", "aiohttp", "round")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _agent_read(url: str) -> object:
    from dsv4ops.remote.agent.httpwait import op_http
    from dsv4ops.remote.replies import http_reply
    from dsv4ops.watch.readings import server_reading

    reply = op_http(None, {"url": url, "max_bytes": METRICS_READ_CAP_BYTES})  # type: ignore[arg-type]
    return _said(server_reading("decode", http_reply(reply), url=url))


def _aiohttp_read(url: str) -> object:
    import asyncio

    from dsv4ops.canary.loadgen import OVERSIZED, ChatClient
    from dsv4ops.remote.results import HttpReply
    from dsv4ops.watch.readings import server_reading

    async def read() -> tuple[int, str, str | None]:
        async with ChatClient(url, engine="aiohttp") as client:
            return await client.get_text_reply(
                url, timeout_s=300.0, max_bytes=METRICS_READ_CAP_BYTES
            )

    status, text, why = asyncio.run(read())
    reply = HttpReply(status or None, text, why, 0.0, oversized=why == OVERSIZED)
    return _said(server_reading("decode", reply, url=url))


def _said(r: ServerReading) -> str:
    if r.oversized:
        return f"oversized: {r.error}"
    return f"read: running {r.running}, decode tokens {r.decode_tokens}" if r.up else f"{r.error}"


def _before_read(url: str) -> object:
    """The read before issue 40: the whole body, every family parsed."""
    import urllib.request

    from dsv4ops.metrics.prom import parse_text

    with urllib.request.urlopen(url, timeout=600) as resp:
        text = resp.read().decode("utf-8", "replace")
    return f"{sum(map(len, parse_text(text).series.values()))} series parsed"


def _round(ports: list[int]) -> object:
    from dsv4ops.clock import SystemClock
    from dsv4ops.remote import LocalExecutor, Supervisor
    from dsv4ops.watch import WatchEndpoints, Watcher, WatchSettings

    base = [f"http://127.0.0.1:{p}" for p in ports]
    endpoints = WatchEndpoints(
        router_url=base[2],
        router_metrics_url=base[2] + "/metrics",
        metrics={"prefill": base[0] + "/metrics", "decode": base[1] + "/metrics"},
        health={"prefill": base[0] + "/health", "decode": base[1] + "/health"},
        model="default",
        decode_buckets=(),
    )
    with tempfile.TemporaryDirectory() as work:
        supervisor = Supervisor(LocalExecutor(), work, python=sys.executable)
        w = Watcher(endpoints, WatchSettings(), supervisor.http_many, SystemClock(), probe=False)
        r = w.tick()
    return [f.code for f in r.findings] or r.word


def child(case: str, ports: list[int]) -> None:
    """One measured read in this fresh process: JSON on stdout."""
    url = f"http://127.0.0.1:{ports[0]}/metrics"
    reads: dict[str, Callable[[], object]] = {
        "agent": lambda: _agent_read(url),
        "aiohttp": lambda: _aiohttp_read(url),
        "before": lambda: _before_read(url),
        "round": lambda: _round(ports),
    }
    import dsv4ops.watch  # noqa: F401 - imports are not the read's cost

    before = _rss_mib()
    t0 = time.perf_counter()
    seen = reads[case]()
    wall = time.perf_counter() - t0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    out = {"wall_s": wall, "rss_before_mib": before, "peak_mib": own, "agent_peak_mib": kids}
    print(json.dumps({**out, "saw": str(seen)[:120]}))


def measure(case: str, ports: list[int]) -> dict[str, float | str]:
    cmd = [sys.executable, __file__, "--child", case, *map(str, ports)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{case}: {done.stderr.strip()[-2000:]}")
    result: dict[str, float | str] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=RUNAWAY_SERIES)
    ap.add_argument("--before", action="store_true", help="also the old unbounded read")
    ap.add_argument("--before-series", type=int, default=10**5)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], [int(p) for p in a.child[1:]])
        return 0
    if not 1 <= a.series <= 10**7 or not 1 <= a.before_series <= 10**7:
        ap.error("--series and --before-series in [1, 10^7]")
    real = OBSERVED_DECODE_METRICS.read_bytes()
    # the most a body may carry and still be read: other series just under the cap, then the
    # real body (the parse's worst case: every line scanned, the real families kept)
    near = (METRICS_READ_CAP_BYTES - len(real)) // 53 // 1000 * 1000
    rows: list[tuple[str, Callable[[], Iterable[bytes]], tuple[str, ...]]] = [
        (f"real SGLang body ({len(real) / 1024:.0f} KB)", lambda: [real], CASES),
        (f"{a.series:.0e} series", lambda: runaway_metrics(a.series), CASES),
        (f"{near:,} series + real", lambda: [*runaway_metrics(near), real], CASES),
    ]
    if a.before:
        rows[0] = (*rows[0][:2], (*CASES, "before"))
        rows.append(
            (f"{a.before_series:.0e} series", lambda: runaway_metrics(a.before_series), ("before",))
        )
    print(f"{'input':<26} {'read':<8} {'wall s':>8} {'peak RSS MiB':>13} {'agent MiB':>10}  saw")
    for label, body, cases in rows:
        for case in cases:
            ports = free_ports(3)
            with metrics_unit({p: body for p in ports}):
                r = measure(case, ports)
            agent = f"{r['agent_peak_mib']:>10.0f}" if case == "round" else f"{'-':>10}"
            print(
                f"{label:<26} {case:<8} {r['wall_s']:>8.2f} {r['peak_mib']:>13.0f} {agent}  "
                f"{r['saw']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
