"""A scrape's read is bounded (issue 40: 10^6 series, 50 MB a port, held whole by watch): real
HTTP servers on 127.0.0.1, one sending 10^6 series, read by watch's two real clients (the target
agent's, and this machine's aiohttp one that a local or endpoint target's scrapes use). The read
stops at METRICS_READ_CAP_BYTES, the server could not send its whole body, and the round names
the endpoint that sent too much: a warning (exit 4), never "down", never OK."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from dsv4ops import exitcodes
from dsv4ops.canary.loadgen import OVERSIZED, ChatClient
from dsv4ops.clock import SystemClock
from dsv4ops.metrics.prom import METRICS_READ_CAP_BYTES
from dsv4ops.remote import LocalExecutor, Supervisor
from dsv4ops.watch import WatchEndpoints, Watcher, WatchSettings
from dsv4ops.watch.readings import WATCHED_FAMILIES, server_reading
from testing.ports import free_ports
from testing.watch import (
    OBSERVED_DECODE_METRICS,
    Body,
    FakeServer,
    metrics_unit,
    runaway_metrics,
)

ROUTER_TEXT = (
    "# TYPE smg_worker_health gauge\n"
    'smg_worker_health{worker="http://127.0.0.1:1"} 1\n'
    'smg_worker_health{worker="http://127.0.0.1:2"} 1\n'
)


def _endpoints(prefill: int, decode: int, router: int) -> WatchEndpoints:
    def base(p: int) -> str:
        return f"http://127.0.0.1:{p}"

    return WatchEndpoints(
        router_url=base(router),
        router_metrics_url=base(router) + "/metrics",
        metrics={"prefill": base(prefill) + "/metrics", "decode": base(decode) + "/metrics"},
        health={"prefill": base(prefill) + "/health", "decode": base(decode) + "/health"},
        model="default",
        decode_buckets=(),
    )


def test_the_agent_read_stops_at_the_cap_and_a_real_body_fits_far_below_it(
    tmp_path: Path,
) -> None:
    runaway, normal, near = free_ports(3)
    real = OBSERVED_DECODE_METRICS.read_bytes()
    assert len(real) * 16 < METRICS_READ_CAP_BYTES  # a TP4 unit's four ranks fit four times over
    # the most a body may be and still be read: other series, then the real body, under the cap
    noise = b"".join(runaway_metrics(150_000))
    assert len(noise) + len(real) < METRICS_READ_CAP_BYTES
    bodies: dict[int, Body] = {
        runaway: runaway_metrics,
        normal: lambda: [real],
        near: lambda: [noise, real],
    }
    supervisor = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    with metrics_unit(bodies) as sent:
        big, ok, full = supervisor.http_many(
            [
                {"url": f"http://127.0.0.1:{p}/metrics", "max_bytes": METRICS_READ_CAP_BYTES}
                for p in (runaway, normal, near)
            ],
            timeout_s=30.0,
        )
    assert (big.status, big.oversized, big.body) == (200, True, "")
    assert not sent.whole[runaway] and sent.sent[runaway] < 40 << 20, sent  # of ~53 MB
    assert (ok.oversized, ok.body.encode()) == (False, real) and sent.whole[normal]
    decode = server_reading("decode", ok)
    assert decode.up and decode.decode_tokens is not None and decode.running is not None
    assert not full.oversized and server_reading("decode", full) == decode


def test_this_machines_client_stops_at_the_cap_too() -> None:
    (runaway,) = free_ports(1)
    url = f"http://127.0.0.1:{runaway}"

    async def read() -> tuple[int, str, str | None]:
        async with ChatClient(url, engine="aiohttp") as client:
            return await client.get_text_reply(
                url + "/metrics", timeout_s=30.0, max_bytes=METRICS_READ_CAP_BYTES
            )

    with metrics_unit({runaway: runaway_metrics}) as sent:
        status, text, why = asyncio.run(read())
    assert (status, text, why) == (200, "", OVERSIZED)
    assert not sent.whole[runaway] and sent.sent[runaway] < 40 << 20, sent


def test_a_round_names_the_endpoint_that_sent_too_much_and_is_a_warning_not_down(
    tmp_path: Path,
) -> None:
    prefill, decode, router = free_ports(3)
    endpoints = _endpoints(prefill, decode, router)
    supervisor = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    watcher = Watcher(endpoints, WatchSettings(), supervisor.http_many, SystemClock(), probe=False)
    bodies: dict[int, Body] = {
        prefill: lambda: [FakeServer("prefill", running=2, tokens=50).text().encode()],
        decode: runaway_metrics,
        router: lambda: [ROUTER_TEXT.encode()],
    }
    with metrics_unit(bodies):
        rounds = [watcher.tick() for _ in range(3)]  # 3 > the 2 silent scrapes of "down"
    for r in rounds:
        codes = {(f.code, f.component) for f in r.findings}
        assert codes == {("metrics_oversized", "decode")}, [f.line() for f in r.findings]
        finding = r.findings[0]
        assert finding.evidence[0].startswith(f"{endpoints.metrics['decode']} sent more than 8 MiB")
        assert r.word == "warning" and exitcodes.for_severity(r.word) == exitcodes.UNDECIDED
        assert r.scrape.servers["prefill"].running == 2.0  # the others are still read
        assert r.to_json()["findings"][0]["runbook"] == "runbooks/pd-safe-restart.md"


def test_a_reading_keeps_only_the_families_watch_reads() -> None:
    """A body within the cap that also carries 20 000 series of something else: the reading's
    numbers are those of the real body alone."""
    from dsv4ops.metrics.prom import parse_text
    from dsv4ops.remote.results import HttpReply

    real = OBSERVED_DECODE_METRICS.read_text(encoding="utf-8")
    noise = b"".join(runaway_metrics(20_000)).decode()
    assert len(real) + len(noise) < METRICS_READ_CAP_BYTES
    mixed = server_reading("decode", HttpReply(200, noise + real + noise, None, 0.0))
    assert mixed == server_reading("decode", HttpReply(200, real, None, 0.0))
    kept = parse_text(noise + real, WATCHED_FAMILIES)
    assert "runaway:series" not in kept.series and len(kept.series) <= len(WATCHED_FAMILIES) * 2
