"""/health as SGLang 0.5.23 answers it (http_server.health_generate): a 1-token probe, then a poll
once a second; any output the server produced since the check began counts (last_receive_tstamp),
so a busy prefill whose probe queues behind other prompts is healthy, and only one that produces
nothing for the whole health timeout (a prompt longer than it) fails."""

from __future__ import annotations

import asyncio
import uuid

from dsv4ops.twin.args import parse_args
from dsv4ops.twin.config import TwinConfig
from dsv4ops.twin.content import Plan
from dsv4ops.twin.engine import Req
from dsv4ops.twin.formats import Job
from dsv4ops.twin.kernel_package import resolve_kernel_config
from dsv4ops.twin.parse import Bootstrap
from dsv4ops.twin.pd import FAKE_BOOTSTRAP_HOST
from dsv4ops.twin.server import TwinServer

# 0.1 wall s per model s: the health timeout (5 model s) is 0.5 s, the poll 0.1 s, and a prompt
# of 100 tokens (10 ms each) one model second
CONFIG = TwinConfig(time_scale=0.1, health_timeout_s=5.0, prefill_ms_per_token=10.0)


def _prefill() -> TwinServer:
    args = parse_args(
        ["--model-path", "/models/m", "--port", "1", "--disaggregation-mode", "prefill"]
    )
    server = TwinServer(args, CONFIG, {}, resolve_kernel_config({}))
    server.status = "up"
    return server


async def _prompt(server: TwinServer, tokens: int) -> None:
    rid = uuid.uuid4().hex
    job = Job("generate", rid, "m", False, False, tokens, 1, 0)
    req = Req(rid=rid, plan=Plan("x", ["ok"], None, True), max_tokens=1, prompt_tokens=tokens)
    boot = Bootstrap(FAKE_BOOTSTRAP_HOST, None, 0)
    await server.prepare(job, req, boot, "p")


def test_a_busy_prefill_is_healthy_while_its_probe_waits_behind_other_prompts() -> None:
    async def run() -> tuple[bool, int]:
        server = _prefill()
        # 20 prompts of 1 model s each: the probe queues 20 model s, four times the timeout,
        # while a prompt finishes every model second
        prompts = [asyncio.create_task(_prompt(server, 100)) for _ in range(20)]
        await asyncio.sleep(0.05)
        healthy = await server.health()
        waiting = len(server._prefill_waiting)
        for t in prompts:
            t.cancel()
        await asyncio.gather(*prompts, return_exceptions=True)
        return healthy and not server.unhealthy, waiting

    healthy, waiting = asyncio.run(run())
    assert healthy
    assert waiting > 5  # answered long before the queue drained


def test_a_prefill_producing_nothing_for_the_timeout_fails_health() -> None:
    async def run() -> tuple[bool, bool]:
        server = _prefill()
        # one prompt of 50 model s, ten times the timeout: nothing finishes while /health waits
        prompt = asyncio.create_task(_prompt(server, 5000))
        await asyncio.sleep(0.05)
        healthy = await server.health()
        prompt.cancel()
        await asyncio.gather(prompt, return_exceptions=True)
        return healthy, server.unhealthy

    assert asyncio.run(run()) == (False, True)


def test_an_idle_prefill_answers_health_with_its_probe() -> None:
    server = _prefill()
    assert asyncio.run(server.health())
