"""Reaching the server and reading its limits, before a judge sends load (canary/limits.py
holds what the limits mean; this module asks the workers for them)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from dsv4ops.canary.limits import ServerLimits
from dsv4ops.canary.loadgen import TIMED_OUT, ChatClient
from dsv4ops.clock import perf_s
from dsv4ops.errors import CanaryError
from dsv4ops.jsontypes import JSONObject

# Reachability: how long the gate keeps asking, how long one try may take, the pause between.
REACH_BUDGET_S = 12.0
REACH_TRY_S = 5.0
REACH_PAUSE_S = 0.5
REACH_REFUSED_TRIES = 3  # nothing listening this many times in a row: no point going on


async def require_reachable(client: ChatClient) -> None:
    """The router answers HTTP at all (any status), within REACH_BUDGET_S; CanaryError if not."""
    url = client.base_url + "/v1/models"
    t0 = perf_s()
    tries = refused = 0
    why = ""
    while True:
        tries += 1
        status, _, why_not = await client.get_text_reply(url, timeout_s=REACH_TRY_S)
        if status:
            return
        why = why_not or "no answer"
        refused = 0 if why_not == TIMED_OUT else refused + 1
        if refused >= REACH_REFUSED_TRIES or perf_s() - t0 + REACH_PAUSE_S >= REACH_BUDGET_S:
            break
        await asyncio.sleep(REACH_PAUSE_S)
    raise CanaryError(
        f"cannot reach {client.base_url}: {tries} tries in {perf_s() - t0:.0f} s, the last: {why}",
        hint="check --url / the target's router (`dsv4ops status`)",
    )


async def read_limits(client: ChatClient, worker_urls: Sequence[str]) -> ServerLimits:
    """The workers' context length and running cap (their smallest); empty without workers."""
    if not worker_urls:
        return ServerLimits(source="no worker URL: the server's limits are unknown")
    replies = await asyncio.gather(
        *(
            client.get_text_reply(u.rstrip("/") + path, timeout_s=REACH_TRY_S)
            for u in worker_urls
            for path in ("/v1/models", "/server_info")
        )
    )
    contexts: list[int] = []
    running: list[int] = []
    decode: tuple[int | None, bool | None] = (None, None)
    for i in range(0, len(replies), 2):
        card, info = _json(replies[i][1]), _json(replies[i + 1][1])
        ctx = _int(_first_card(card).get("max_model_len"))
        ctx = ctx or _int(info.get("context_length"))
        if ctx is None and (n := _int(info.get("max_req_input_len"))) is not None:
            ctx = n + 1
        if ctx is not None:
            contexts.append(ctx)
        if info.get("disaggregation_mode") == "decode":
            # SGLang's server args keep context_length None unless --context-length was given
            decode = (ctx, "context_length" in info and info["context_length"] is not None)
        states = info.get("internal_states")
        state = states[0] if isinstance(states, list) and states else {}
        cap = _int(
            state.get("effective_max_running_requests_per_dp") if isinstance(state, dict) else None
        )
        if (cap := cap or _int(info.get("max_running_requests"))) is not None:
            running.append(cap)
    return ServerLimits(
        min(contexts) if contexts else None,
        min(running) if running else None,
        f"{len(worker_urls)} worker(s): /v1/models, /server_info",
        *decode,
    )


def _json(text: str) -> JSONObject:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _first_card(models: JSONObject) -> JSONObject:
    data = models.get("data")
    first = data[0] if isinstance(data, list) and data else {}
    return first if isinstance(first, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
