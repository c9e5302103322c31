"""The decode batch loop on its own: abort-cascade window, wedge, token production."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dsv4ops.twin.config import load_config
from dsv4ops.twin.content import plan_completion
from dsv4ops.twin.engine import DecodeEngine, Req
from dsv4ops.twin.events import EventLog, read_events
from dsv4ops.twin.formats import EOS_TOKEN_ID
from dsv4ops.twin.hazards import HazardBoard


def _engine(tmp_path: Path, *, overlap: bool, **env: str) -> DecodeEngine:
    cfg = load_config({"DSV4_TWIN_TIME_SCALE": "0.01", **env})
    log = EventLog(str(tmp_path / "ev.jsonl"), role="decode", port=1, instance_id="i")
    return DecodeEngine(
        config=cfg,
        buckets=[8, 16],
        overlap=overlap,
        multi_stream_overlap=False,
        max_running=256,
        hazards=HazardBoard(cfg),
        events=log,
    )


def _req(i: int, tokens: int = 10_000) -> Req:
    return Req(
        rid=f"r{i}", plan=plan_completion(f"p{i}", tokens), max_tokens=tokens, prompt_tokens=1
    )


async def _abort_all(engine: DecodeEngine, n: int, gap_s: float) -> list[Req]:
    reqs = [_req(i) for i in range(n)]
    for r in reqs:
        engine.submit(r)
    await asyncio.sleep(0.05)
    for r in reqs:
        engine.abort(r, "abort_request")
        await asyncio.sleep(gap_s)
    return reqs


def test_aborts_inside_the_window_wedge_with_overlap_on(tmp_path: Path) -> None:
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
        "abort_cascade",
        "wedged",
    ]


def test_aborts_spread_beyond_the_window_are_no_cascade(tmp_path: Path) -> None:
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


def test_every_running_request_gets_one_token_per_step(tmp_path: Path) -> None:
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


def _emit_all(req: Req) -> list[tuple[str, str]]:
    req.build_pieces()
    while req.finish_reason is None:
        req.emit_next()
    return req.pieces


def _said(text: str, stop: tuple[str, ...], tokens: int = 50) -> Req:
    from dsv4ops.twin.content import Plan

    words = [w if i == 0 else " " + w for i, w in enumerate(text.split())]
    return Req(
        rid="s", plan=Plan("k", words, None, True), max_tokens=tokens, prompt_tokens=1, stop=stop
    )


def test_a_stop_string_ends_the_output_cut_before_it_with_matched() -> None:
    req = _said("one two three four five", (" four",))
    pieces = _emit_all(req)
    assert "".join(p for _, p in pieces) == "one two three"
    assert req.finish_reason == "stop" and req.matched == " four"
    assert req.emitted == 4  # the stop string's token counts (output_ids through the stop)


def test_text_that_may_start_a_stop_string_is_held_then_sent_in_one_chunk() -> None:
    req = _said("one two three four five", ("two three x", "five"))
    pieces = _emit_all(req)
    # " two" and " three" could begin "two three x": held, then sent together with " four";
    # the text is cut where "five" starts, so the space of the " five" token stays
    assert pieces == [("text", "one"), ("text", " two three four"), ("text", " ")]
    assert req.finish_reason == "stop" and req.matched == "five"


def test_without_a_match_the_output_runs_to_its_natural_end_and_held_text_is_sent() -> None:
    req = _said("one two three", ("three x",))
    assert "".join(p for _, p in _emit_all(req)) == "one two three"
    assert req.finish_reason == "stop" and req.matched == EOS_TOKEN_ID  # a natural end
    capped = _said("one two three", ("nothing",), tokens=2)
    assert "".join(p for _, p in _emit_all(capped)) == "one two"
    assert capped.finish_reason == "length"
