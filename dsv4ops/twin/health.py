"""SGLang 0.5.23's /health with generation (http_server.health_generate, L777-785) on the twin."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Protocol

from .config import TwinConfig
from .content import Plan
from .engine import DecodeEngine, Req
from .hazards import HazardBoard


class Checked(Protocol):
    """What /health reads of the server (server.TwinServer), and its `unhealthy` it sets."""

    config: TwinConfig
    hazards: HazardBoard
    role: str
    status: str
    gracefully_exit: bool
    health_generation: bool
    unhealthy: bool
    engine: DecodeEngine | None

    async def prefill_compute(self, prompt_tokens: int) -> None: ...

    def last_output_at(self) -> float: ...


# /health polls for output once a second (http_server.health_generate), in model seconds here
HEALTH_POLL_S = 1.0


async def health_generate(server: Checked) -> bool:
    """A 1-token fake-bootstrap generation, then a poll once a second for up to the health
    timeout; any output the server produced since the check began (TokenizerManager.
    last_receive_tstamp: a busy server's other requests, not only the probe) counts as healthy.
    A server producing nothing within the timeout (wedged, or its probe queued behind a batch
    that never ends) fails it."""
    if server.gracefully_exit or server.status != "up":
        return False
    await asyncio.sleep(server.config.wall(server.hazards.health_delay_s()))  # slow_health
    if not server.health_generation:
        return True
    tic = time.monotonic()
    probe = Req(
        rid=f"HEALTH_CHECK_{uuid.uuid4().hex[:8]}",
        plan=Plan("health", ["ok"], None, True),
        max_tokens=1,
        prompt_tokens=1,
        is_health_probe=True,
    )
    if server.role == "prefill":
        task: asyncio.Future[object] = asyncio.ensure_future(server.prefill_compute(1))
    else:
        assert server.engine is not None
        server.engine.submit(probe)
        task = asyncio.ensure_future(probe.done.wait())
    deadline = tic + server.config.wall(server.config.health_timeout_s)
    poll = server.config.wall(HEALTH_POLL_S)
    try:
        while (left := deadline - time.monotonic()) > 0:
            done, _ = await asyncio.wait({task}, timeout=min(poll, left))
            if done or server.last_output_at() > tic:
                server.unhealthy = False
                return True
        server.unhealthy = True
        return False
    finally:
        if not task.done():
            task.cancel()
        if server.engine is not None and probe.finish_reason is None:
            server.engine.discard(probe)
