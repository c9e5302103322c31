"""The decode batch loop on its own: abort-cascade window, wedge, token production."""

from __future__ import annotations

import asyncio

from dsv4ops.twin.config import load_config
from dsv4ops.twin.content import plan_completion
from dsv4ops.twin.engine import DecodeEngine, Req
from dsv4ops.twin.events import EventLog, read_events
from dsv4ops.twin.hazards import HazardBoard


def _engine(tmp_path, *, overlap: bool, **env: str) -> DecodeEngine:
    cfg = load_config({"DSV4_TWIN_TIME_SCALE": "0.01", **env})
    log = EventLog(str(tmp_path / "ev.jsonl"), role="decode", port=1, instance_id="i")
    return DecodeEngine(config=cfg, buckets=[8, 16], overlap=overlap, multi_stream_overlap=False,
                        max_running=256, hazards=HazardBoard(cfg), events=log)


def _req(i: int, tokens: int = 10_000) -> Req:
    return Req(rid=f"r{i}", plan=plan_completion(f"p{i}", tokens), max_tokens=tokens,
               prompt_tokens=1)


async def _abort_all(engine: DecodeEngine, n: int, gap_s: float) -> list[Req]:
    reqs = [_req(i) for i in range(n)]
    for r in reqs:
        engine.submit(r)
    await asyncio.sleep(0.05)
    for r in reqs:
        engine.abort(r, "abort_request")
        await asyncio.sleep(gap_s)
    return reqs


def test_aborts_inside_the_window_wedge_with_overlap_on(tmp_path):
    async def main() -> None:
        engine = _engine(tmp_path, overlap=True)
        task = asyncio.create_task(engine.run())
        await _abort_all(engine, 8, 0.0)
        assert engine.wedged and engine.running
        late = _req(99, tokens=2)
        engine.submit(late)
        await asyncio.sleep(0.1)
        assert late.emitted == 0 and late in engine.waiting
        task.cancel()

    asyncio.run(main())
    assert [e["event"] for e in read_events(str(tmp_path / "ev.jsonl"))] == [
        "abort_cascade", "wedged"]


def test_aborts_spread_beyond_the_window_are_no_cascade(tmp_path):
    async def main() -> None:
        # 8 aborts, 30 ms apart; the window is 2 model s = 20 ms of wall.
        engine = _engine(tmp_path, overlap=True)
        task = asyncio.create_task(engine.run())
        await _abort_all(engine, 8, 0.03)
        assert not engine.wedged
        done = _req(100, tokens=3)
        engine.submit(done)
        await asyncio.wait_for(done.done.wait(), 2)
        assert done.emitted == 3 and done.finish_reason == "length"
        task.cancel()

    asyncio.run(main())
    assert read_events(str(tmp_path / "ev.jsonl")) == []


def test_every_running_request_gets_one_token_per_step(tmp_path):
    async def main() -> None:
        engine = _engine(tmp_path, overlap=False)
        task = asyncio.create_task(engine.run())
        reqs = [_req(i, tokens=5) for i in range(6)]
        for r in reqs:
            engine.submit(r)
        await asyncio.wait_for(asyncio.gather(*(r.done.wait() for r in reqs)), 5)
        assert engine.steps_done == 5  # all six joined the first step and ran together
        assert all(r.emitted == 5 for r in reqs)
        task.cancel()

    asyncio.run(main())
