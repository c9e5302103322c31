"""Wedge-detection latency (stall → verdict): the canary's stream-silence path side by side with the
metrics-only path, against the faithful twin (time scale 1.0, 0.5.23 metric semantics).

Each trial starts a twin (unified, `--enable-metrics`, default `--decode-log-interval 40`), holds
`--streams` long streams through the canary's own client, waits until the metrics detector has
seen healthy bumps, then forces the wedge (rank 0 blocked: gauges frozen with running > 0 and
gen_throughput > 0) at a random phase of the log interval. Two watchdogs watch the same run: one
fed only by the streams, one only by /metrics scrapes every 0.5 s. Latency = verdict time − the
moment the wedge was forced. Both counter cadences are measured: 0.5.23's (every decode
iteration) and the worst case (only at the log interval, DSV4_TWIN_REALTIME_TOKENS=
per_log_interval). Goals: stream silence ≤ 3 s; metrics ≤ two log intervals (40 × the modelled
step). Bounded: each trial ends by itself within `--timeout` seconds after the wedge.

A third path is `dsv4ops watch` itself (issue 23): a real Watcher (its HTTP through the target
agent, as on a local target) with its probe stream on the same twin, its finding timed from the
probe stream's last token, and reported as a ratio to the twin's log interval. Goal: ≤ 3 s.

    .venv/bin/python benchmarks/wedge_detection.py [--trials 3] [--streams 60]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsv4ops.canary.loadgen import ChatClient  # noqa: E402
from dsv4ops.canary.sampler import MetricsSampler  # noqa: E402
from dsv4ops.canary.watchdog import FREEZE, FREEZE_METRICS, Watchdog  # noqa: E402
from dsv4ops.canary.workload import base_body, text_prompt  # noqa: E402
from dsv4ops.twin.perf import default_decode_buckets, padded_batch, step_ms  # noqa: E402
from testing.twin import twin_server  # noqa: E402

if TYPE_CHECKING:  # the bench imports dsv4ops.watch lazily, inside the run it times
    from dsv4ops.watch import Round

LOG_INTERVAL = 40
CADENCES = ("per_iteration", "per_log_interval")


class _WatchPath:
    """`dsv4ops watch` on the twin in a thread: when its first decode_wedged finding came, and
    when its probe stream had its last token (perf_counter_ns)."""

    def __init__(self, url: str, workdir: str) -> None:
        import threading

        from dsv4ops.clock import SystemClock
        from dsv4ops.remote import Supervisor, connect
        from dsv4ops.watch import Watcher, WatchSettings
        from dsv4ops.watch.endpoints import WatchEndpoints
        from dsv4ops.watch.stream import ProbeStream

        endpoints = WatchEndpoints(
            router_url=url,
            router_metrics_url=url + "/metrics",
            metrics={"decode": url + "/metrics"},
            health={"decode": url + "/health"},
            model="default",
            decode_buckets=(),
        )
        self.stream = ProbeStream(url, "default")
        self.watcher = Watcher(
            endpoints,
            WatchSettings(),
            Supervisor(connect("local"), workdir).http_many,
            SystemClock(),
            probe=False,
            stream=self.stream,
            scrape_http=self.stream.http_many,
        )
        self.found_ns: int | None = None
        self.last_token_ns: int | None = None
        self.early = False
        self.armed = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        def emit(r: Round) -> None:
            if self.found_ns is None and any(f.code == "decode_wedged" for f in r.findings):
                self.early = not self.armed
                self.found_ns = time.perf_counter_ns()
                rec = self.stream._rec
                self.last_token_ns = rec.t_last if rec is not None else None

        self.watcher.run(emit, stop=lambda: self._done.is_set() or self.found_ns is not None)

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=30)
        self.stream.close()


async def _trial(
    url: str, streams: int, warm_s: float, timeout_s: float, workdir: str
) -> tuple[float, float, float]:
    """One wedge: (stream-silence latency s, metrics-only latency s, watch's latency from its
    probe stream's last token s); nan when not detected."""
    wd_stream, wd_metrics = Watchdog(), Watchdog()
    watch = _WatchPath(url, workdir)
    async with ChatClient(url, connections=streams + 8, watchdog=wd_stream) as client:
        sampler = MetricsSampler(client, [url], interval_s=0.5, watchdog=wd_metrics)
        async with wd_stream, wd_metrics, sampler:
            tasks = [
                asyncio.create_task(
                    client.stream(
                        base_body(
                            [{"role": "user", "content": text_prompt(i)}], max_tokens=100_000
                        ),
                        rid=f"wedge-bench-{i}",
                        tag="bench",
                    )
                )
                for i in range(streams)
            ]
            await asyncio.sleep(warm_s + random.uniform(0.0, 3.0))  # a random log-interval phase
            watch.armed = True
            t_wedge = time.perf_counter_ns()
            status = await client.post_json(
                url + "/_twin/hazard", {"hazard": "wedge", "state": "force"}
            )
            assert status == 200, status
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and not (
                _first(wd_stream, FREEZE) and _first(wd_metrics, FREEZE_METRICS) and watch.found_ns
            ):
                await asyncio.sleep(0.05)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    watch.close()
    s, m = _first(wd_stream, FREEZE), _first(wd_metrics, FREEZE_METRICS)
    early = [e for e in (*wd_stream.events, *wd_metrics.events) if e.detected_ns < t_wedge]
    if early or watch.early:
        raise SystemExit(
            "false wedge verdict before the wedge: "
            + (early[0].detail if early else "watch's decode_wedged")
        )
    w = (
        (watch.found_ns - watch.last_token_ns) / 1e9
        if watch.found_ns and watch.last_token_ns
        else float("nan")
    )
    return (
        (s - t_wedge) / 1e9 if s else float("nan"),
        (m - t_wedge) / 1e9 if m else float("nan"),
        w,
    )


def _first(wd: Watchdog, kind: str) -> int | None:
    return next((e.detected_ns for e in wd.events if e.kind == kind), None)


def _row(name: str, xs: list[float]) -> str:
    ok = [x for x in xs if x == x]
    if not ok:
        return f"{name:>16} {'-':>8} {'-':>8}   detected 0/{len(xs)}"
    return (
        f"{name:>16} {statistics.median(ok):8.2f} {max(ok):8.2f}   " f"detected {len(ok)}/{len(xs)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="wedges per cadence")
    parser.add_argument("--streams", type=int, default=60)
    parser.add_argument("--warm", type=float, default=8.0, help="healthy seconds before a wedge")
    parser.add_argument("--timeout", type=float, default=20.0)
    opts = parser.parse_args()
    step = step_ms(opts.streams, default_decode_buckets(256), a=18.0, b=1.05, hidden_ms=5.0)
    two_logs = 2 * LOG_INTERVAL * step / 1000.0
    print(
        f"wedge detection, twin at scale 1.0, {opts.streams} streams "
        f"(padded {padded_batch(opts.streams, default_decode_buckets(256))}), step {step:.1f} ms, "
        f"log interval {LOG_INTERVAL} iterations = {LOG_INTERVAL * step / 1000:.2f} s"
    )
    verdict = True
    for cadence in CADENCES:
        env = {"DSV4_TWIN_TIME_SCALE": "1.0", "DSV4_TWIN_REALTIME_TOKENS": cadence}
        stream_s, metrics_s, watch_s = [], [], []
        for _ in range(opts.trials):
            with (
                tempfile.TemporaryDirectory() as workdir,
                twin_server(["--enable-metrics", "--max-running-requests", "256"], env=env) as proc,
            ):
                s, m, w = asyncio.run(
                    _trial(proc.url, opts.streams, opts.warm, opts.timeout, workdir)
                )
            stream_s.append(s)
            metrics_s.append(m)
            watch_s.append(w)
        ok_s = [x for x in stream_s if x == x]
        ok_m = [x for x in metrics_s if x == x]
        print(f"\nrealtime_tokens_total cadence: {cadence}")
        print(f"{'path':>16} {'median s':>8} {'max s':>8}")
        print(_row("stream silence", stream_s))
        print(_row("metrics only", metrics_s))
        print(_row("watch", watch_s) + "   (from its probe stream's last token)")
        log_s = LOG_INTERVAL * step / 1000.0
        ok_w = [x for x in watch_s if x == x]
        if ok_w:
            print(
                f"{'watch / log int.':>16} {statistics.median(ok_w) / log_s:8.2f} "
                f"{max(ok_w) / log_s:8.2f}   (ratio to the twin's log interval, {log_s:.2f} s)"
            )
        goal_w = len(ok_w) == len(watch_s) and max(ok_w) <= 3.0
        if ok_s and ok_m:
            print(
                f"{'ratio':>16} {statistics.median(ok_m) / statistics.median(ok_s):8.2f}"
                "   (metrics / stream, medians)"
            )
        goal_s = len(ok_s) == len(stream_s) and max(ok_s) <= 3.0
        goal_m = len(ok_m) == len(metrics_s) and max(ok_m) <= two_logs
        verdict = verdict and goal_s and goal_m and goal_w
        print(
            f"  goal stream silence <= 3 s: {'met' if goal_s else 'NOT met'}; "
            f"metrics <= two log intervals ({two_logs:.2f} s): {'met' if goal_m else 'NOT met'}; "
            f"watch <= 3 s from the last token: {'met' if goal_w else 'NOT met'}"
        )
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
