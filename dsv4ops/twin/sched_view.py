"""What a twin server's scheduler reports right now: the live stats a log_stats call would
publish, whether it is fully idle, and the snapshot /metrics renders (server.py holds the state;
this module only reads it).
"""

from __future__ import annotations

from typing import Protocol

from .args import ServerArgs
from .engine import DecodeEngine
from .kv_receiver import KVReceiver
from .limits import MODEL_CONTEXT_LEN
from .memory import memory_usage
from .metrics import SchedulerSnapshot
from .pd import BootstrapServer, Room
from .reporter import SchedStats, StatsReporter

MAX_TOTAL_TOKENS = 2_000_000


class TwinServer(Protocol):
    """What this module reads of server.py's TwinServer (a Protocol: server.py imports this)."""

    args: ServerArgs
    status: str
    buckets: list[int]
    engine: DecodeEngine | None
    reporter: StatsReporter
    bootstrap: BootstrapServer | None
    receiver: KVReceiver | None
    _prefill_waiting: dict[int, Room | None]
    _prefill_running: list[Room | None]


def live_stats(server: TwinServer) -> SchedStats:
    """The scheduler's state right now: what a log_stats call would publish.

    Prefill stages as in SGLang: bootstrap queue (the decode has not asked for the room yet)
    → waiting → running (prefill compute) → inflight (KV not pulled yet). The twin computes a
    prompt before its handshake; such a room counts as bootstrapping until the decode asks.
    """
    e = server.engine
    running = (len(e.running) if e else 0) + len(server._prefill_running)
    waiting = list(server._prefill_waiting.values())
    bootstrapping = inflight = 0
    if server.bootstrap is not None:
        computing = {id(r) for r in server._prefill_running}
        for r in server.bootstrap.rooms.values():
            if not r.handshaken and id(r) not in computing:
                bootstrapping += 1
            elif r.handshaken and r.kv_ready.is_set() and not r.done.is_set():
                inflight += 1
    queued = sum(1 for r in waiting if r is None or r.handshaken)
    return SchedStats(
        running=running,
        queued=(len(e.waiting) if e else 0) + queued,
        token_usage=min(1.0, running * 4096 / MAX_TOTAL_TOKENS),
        prefill_bootstrap_queue=bootstrapping,
        prefill_inflight_queue=inflight,
        decode_transfer_queue=server.receiver.in_flight if server.receiver else 0,
    )


def fully_idle(server: TwinServer) -> bool:
    """Scheduler.is_fully_idle: nothing running, waiting, bootstrapping or in transfer."""
    s = live_stats(server)
    return not (
        s.running
        or s.queued
        or s.prefill_bootstrap_queue
        or s.prefill_inflight_queue
        or s.decode_transfer_queue
    )


def snapshot(server: TwinServer) -> SchedulerSnapshot:
    if server.engine is None and server.status == "up":
        # The prefill's scheduler loop is not a task here: its idle path (which on the box
        # spins all the time) is evaluated when someone looks, with the same outcome.
        server.reporter.on_idle()
    p = server.reporter.published
    return SchedulerSnapshot(
        published=p,
        realtime_tokens=dict(server.reporter.realtime_tokens),
        graph_passes=dict(server.reporter.graph_passes),
        idle_seconds=server.reporter.idle_seconds,
        transfer_failed_total=(server.receiver.failed if server.receiver else 0)
        + (server.bootstrap.transfer_failed if server.bootstrap else 0),
        bootstrap_failed_total=(server.receiver.bootstrap_failed if server.receiver else 0)
        + (server.bootstrap.bootstrap_failed if server.bootstrap else 0),
        max_total_num_tokens=MAX_TOTAL_TOKENS,
        context_len=server.args.context_length or MODEL_CONTEXT_LEN,
        page_size=server.args.page_size,
        memory=memory_usage(server.buckets, token_capacity=MAX_TOTAL_TOKENS),
    )
