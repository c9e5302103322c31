"""Client self-check: its own CPU, event-loop lag and the machine's CPU, sampled live.

A saturated client delays receipt stamps and even throttles the server (reference
load-generators.md §4.3: a saturated client inflated ITL 26–60% and cut delivered throughput), so
a run where the client was the bottleneck is reported INCONCLUSIVE, not as server numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.canary.stats import percentile
from dsv4ops.canary.verdict import Kind
from dsv4ops.clock import cpu_s, perf_s


def read_proc_stat(path: str = "/proc/stat") -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine; None where /proc/stat does not exist."""
    try:
        with open(path, encoding="ascii") as fh:
            fields_ = fh.readline().split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields_]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


@dataclass(frozen=True)
class ClientProblem:
    """Why the client's numbers are not the server's: its kind (verdict.Kind) and its words."""

    kind: Kind
    text: str


class SelfCheckRecord(TypedDict):
    """The client's self-check as report.json's `client` section (SelfCheckReport.to_json)."""

    client_cpu_cores: float
    client_cpu_peak: float
    loop_lag_p50_ms: float
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    machine_cpu_busy: float | None
    samples: int
    client_bound: bool
    problems: list[str]


@dataclass
class SelfCheckReport:
    cpu_cores: float = 0.0  # process CPU seconds per wall second over the run
    cpu_peak: float = 0.0  # highest 1-interval sample
    loop_lag_p50_ms: float = 0.0
    loop_lag_p99_ms: float = 0.0
    loop_lag_max_ms: float = 0.0
    machine_busy: float | None = None  # share of all cores busy, 0..1
    samples: int = 0
    problems: list[ClientProblem] = field(default_factory=list)

    def to_json(self) -> SelfCheckRecord:
        return {
            "client_cpu_cores": self.cpu_cores,
            "client_cpu_peak": self.cpu_peak,
            "loop_lag_p50_ms": self.loop_lag_p50_ms,
            "loop_lag_p99_ms": self.loop_lag_p99_ms,
            "loop_lag_max_ms": self.loop_lag_max_ms,
            "machine_cpu_busy": self.machine_busy,
            "samples": self.samples,
            "client_bound": bool(self.problems),
            "problems": [p.text for p in self.problems],
        }


class SelfCheck:
    """Run as a background task during a suite: `async with SelfCheck(...) as sc: ...`."""

    def __init__(self, *, tick_s: float = 0.02, cpu_max: float = 0.9, lag_p99_max_ms: float = 50.0):
        self._tick = tick_s
        self._cpu_max = cpu_max
        self._lag_max = lag_p99_max_ms
        self._lags: list[float] = []
        self._cpu_samples: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._t0 = 0.0
        self._cpu0 = 0.0
        self._stat0: tuple[int, int] | None = None
        self.report = SelfCheckReport()

    async def __aenter__(self) -> SelfCheck:
        self._t0 = perf_s()
        self._cpu0 = cpu_s()
        self._stat0 = read_proc_stat()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.report = self._finish()

    async def _run(self) -> None:
        # The ticker: the overshoot of a short sleep is the time other callbacks held the loop.
        last_cpu, last_t = cpu_s(), perf_s()
        while True:
            before = perf_s()
            await asyncio.sleep(self._tick)
            now = perf_s()
            self._lags.append(max(0.0, now - before - self._tick) * 1e3)
            if now - last_t >= 0.5:
                cpu = cpu_s()
                self._cpu_samples.append((cpu - last_cpu) / (now - last_t))
                last_cpu, last_t = cpu, now

    def _finish(self) -> SelfCheckReport:
        wall = max(perf_s() - self._t0, 1e-9)
        rep = SelfCheckReport(
            cpu_cores=(cpu_s() - self._cpu0) / wall,
            cpu_peak=max(self._cpu_samples, default=0.0),
            loop_lag_p50_ms=percentile(self._lags, 50) if self._lags else 0.0,
            loop_lag_p99_ms=percentile(self._lags, 99) if self._lags else 0.0,
            loop_lag_max_ms=max(self._lags, default=0.0),
            samples=len(self._lags),
        )
        stat1 = read_proc_stat()
        if self._stat0 and stat1 and stat1[1] > self._stat0[1]:
            rep.machine_busy = (stat1[0] - self._stat0[0]) / (stat1[1] - self._stat0[1])
        if rep.cpu_cores > self._cpu_max:
            rep.problems.append(
                ClientProblem(
                    Kind.CLIENT_CPU,
                    f"client used {rep.cpu_cores:.2f} cores (limit {self._cpu_max:.2f}): "
                    "client-bound",
                )
            )
        if rep.loop_lag_p99_ms > self._lag_max:
            busy = f", machine {rep.machine_busy:.0%} busy" if rep.machine_busy is not None else ""
            rep.problems.append(
                ClientProblem(
                    Kind.CLIENT_LAG,
                    f"event-loop lag p99 {rep.loop_lag_p99_ms:.1f} ms (limit {self._lag_max:.0f} "
                    f"ms{busy}): receipt timestamps are not trustworthy",
                )
            )
        return rep
