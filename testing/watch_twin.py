"""`dsv4ops watch` against a twin stack (testing/twin_stack.py): its endpoints, the real
supervisor's `http_many` through the local executor (requests made by the target agent, as for
a deployed target), forcing hazards, and waiting for a finding with the real clock."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from dsv4ops.clock import SystemClock
from dsv4ops.remote import Supervisor, connect
from dsv4ops.watch import Round, WatchEndpoints, Watcher, WatchSettings
from testing.twin_stack import TwinStack


def stack_endpoints(stack: TwinStack, buckets: Sequence[int] = ()) -> WatchEndpoints:
    assert stack.router is not None
    workers = {"prefill": stack.prefill.url, "decode": stack.decode.url}
    return WatchEndpoints(
        router_url=stack.router.url,
        router_metrics_url=f"http://127.0.0.1:{stack.router.prometheus_port}/metrics",
        metrics={n: u + "/metrics" for n, u in workers.items()},
        health={n: u + "/health" for n, u in workers.items()},
        model="default", decode_buckets=tuple(buckets))


def local_watcher(stack: TwinStack, workdir: str, settings: WatchSettings,
                  buckets: Sequence[int] = ()) -> Watcher:
    supervisor = Supervisor(connect("local"), workdir)
    return Watcher(stack_endpoints(stack, buckets), settings, supervisor.http_many, SystemClock())


def hazard(url: str, name: str, state: str, **extra: object) -> None:
    httpx.post(url + "/_twin/hazard", json={"hazard": name, "state": state, **extra},
               timeout=5).raise_for_status()


@dataclass
class Watched:
    """Every round a watch ran, and when (wall seconds since it started) each code first showed."""

    rounds: list[Round] = field(default_factory=list)
    first_seen: dict[str, float] = field(default_factory=dict)

    def codes(self) -> set[str]:
        return {f.code for r in self.rounds for f in r.findings}


def watch_for(watcher: Watcher, code: str | None, timeout_s: float) -> Watched:
    """Run the watcher's own loop until `code` shows (or, with None, for `timeout_s` wall
    seconds); give up after `timeout_s`."""
    seen = Watched()
    t0 = time.monotonic()

    def emit(r: Round) -> None:
        seen.rounds.append(r)
        for f in r.findings:
            seen.first_seen.setdefault(f.code, time.monotonic() - t0)

    def stop() -> bool:
        return (code is not None and code in seen.first_seen) or time.monotonic() - t0 >= timeout_s

    watcher.run(emit, stop=stop)
    return seen
