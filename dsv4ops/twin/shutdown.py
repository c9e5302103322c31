"""SIGTERM the way SGLang 0.5.23's TokenizerManager takes it (tokenizer_manager.py L3508-3560,
L4060-4072), in model time.

The handler only sets `gracefully_exit` (from then on `/health` and `/ready` are 503, but the
HTTP port stays open and new requests are still served). A watchdog that wakes every 5 s
notices it, then drains: every 5 s it logs the requests left and waits, until none are; if the
last health check had failed it exits at once instead, as does SGL_FORCE_SHUTDOWN=1. Then it
sends ShutdownReq to the schedulers and gives them up to 15 s to release and exit
(`_SCHEDULER_EXIT_TIMEOUT_SECS`) before killing them; a scheduler blocked in a collective (the
wedge) never answers and is killed after those 15 s. Only then do the ports close.
"""

from __future__ import annotations

import asyncio
import logging
import os

from .server import TwinServer

log = logging.getLogger("sglang.twin")
SCHEDULER_EXIT_TIMEOUT_S = 15.0  # tokenizer_manager.py:456


def on_sigterm(server: TwinServer) -> None:
    if not server.gracefully_exit:
        log.warning("SIGTERM received. Draining requests and shutting down...")
        server.events.emit("sigterm")
    server.gracefully_exit = True


async def sigterm_watchdog(server: TwinServer) -> str:
    """Returns how it ended: "graceful", "forced" or "schedulers_killed"."""
    cfg = server.config
    tick = cfg.wall(cfg.sigterm_tick_s)
    while not server.gracefully_exit:
        await asyncio.sleep(tick)
    while True:
        if server.unhealthy:
            log.error("Signal SIGTERM received while health check failed. Force exiting.")
            return "forced"
        if os.environ.get("SGL_FORCE_SHUTDOWN", "").lower() in ("1", "true", "yes", "on"):
            log.error("Signal SIGTERM received while force shutdown flag set. Force exiting.")
            return "forced"
        left = sorted(server.inflight)
        log.info(
            "Gracefully exiting... Remaining number of requests %d. Remaining requests "
            "remaining_rids=%s.",
            len(left),
            left,
        )
        server.events.emit("draining", remaining=len(left))
        if not left:
            break
        await asyncio.sleep(tick)
    blocked = bool(server.engine is not None and server.engine.wedged)
    exit_s = (
        SCHEDULER_EXIT_TIMEOUT_S if blocked else min(cfg.scheduler_exit_s, SCHEDULER_EXIT_TIMEOUT_S)
    )
    await asyncio.sleep(cfg.wall(exit_s))
    if blocked or cfg.scheduler_exit_s >= SCHEDULER_EXIT_TIMEOUT_S:
        log.warning(
            "Schedulers still alive %ds after ShutdownReq, killing them before they "
            "released: [%d]",
            int(SCHEDULER_EXIT_TIMEOUT_S),
            server.pid,
        )
        return "schedulers_killed"
    return "graceful"
