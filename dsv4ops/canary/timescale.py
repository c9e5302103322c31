"""One clock for every figure of a report: model time.

A twin runs model time scaled (DSV4_TWIN_TIME_SCALE: wall seconds per model second) and says so
in its /server_info (`twin_time_scale`); the server's own figures (gen_throughput, the step it
implies) are model time already, the client's (token timestamps, tok/s it counted) are wall.
Mixed, a report plotted `output tok/s 5803` (client, wall, at scale 0.1) next to a ceiling of
745 tok/s (model). So the client's level figures are brought to model time (ms divided by the
scale, tok/s multiplied) and the report names the clock and the scale. On a real server there is
no such key: model time is wall time (scale 1).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TypedDict

from dsv4ops.canary.fit import LevelPoint
from dsv4ops.canary.loadgen import ChatClient

SERVER_INFO_KEY = "twin_time_scale"


async def server_time_scale(client: ChatClient, worker_url: str | None) -> float:
    """The worker's stated time scale (1.0 when it states none, as a real SGLang)."""
    if worker_url is None:
        return 1.0
    base = worker_url.rstrip("/").removesuffix("/metrics")
    status, text = await client.get_text(base + "/server_info", timeout_s=5.0)
    if status != 200:
        return 1.0
    try:
        scale = json.loads(text).get(SERVER_INFO_KEY)
    except (ValueError, AttributeError):
        return 1.0
    return float(scale) if isinstance(scale, int | float) and scale > 0 else 1.0


def to_model_time(p: LevelPoint, scale: float) -> LevelPoint:
    """A level's client figures on the model clock (the server's figures already are)."""
    if scale == 1.0:
        return p

    def ms(v: float | None) -> float | None:
        return None if v is None else v / scale

    ci = p.output_tok_s_ci
    return replace(
        p,
        step_ms=p.step_ms / scale,
        output_tok_s=p.output_tok_s * scale,
        output_tok_s_ci=None if ci is None else (ci[0] * scale, ci[1] * scale),
        ttft_p50_ms=ms(p.ttft_p50_ms),
        ttft_p99_ms=ms(p.ttft_p99_ms),
        itl_p50_ms=ms(p.itl_p50_ms),
        itl_p99_ms=ms(p.itl_p99_ms),
    )


class ClockRecord(TypedDict):
    """report.json's `clock`: the clock its levels, fits and notes are in."""

    name: str
    time_scale: float
    note: str


def clock_record(scale: float) -> ClockRecord:
    """What report.json says about the clock of its levels, fits and notes."""
    if scale == 1.0:
        return {
            "name": "model",
            "time_scale": 1.0,
            "note": "the server states no time scale: model time is wall time",
        }
    return {
        "name": "model",
        "time_scale": scale,
        "note": f"a twin at time scale {scale:g} (its /server_info): the client's ms are "
        f"divided by {scale:g} and its tok/s multiplied; `summary` stays client wall",
    }


def clock_label(scale: float) -> str:
    return "model time" if scale == 1.0 else f"model time, twin time scale {scale:g}"
