from __future__ import annotations

import json

import pytest

from dsv4ops.canary import records as R
from dsv4ops.canary.records import RequestRecord, parse


def _rec(events: list[tuple[int, object]], t_send: int = 1_000_000_000) -> RequestRecord:
    rec = RequestRecord(rid="r1", t_send=t_send)
    for t, ev in events:
        rec.times.append(t)
        rec.payloads.append(ev if isinstance(ev, bytes) else json.dumps(ev).encode())
    rec.t_end = events[-1][0] + 1_000_000 if events else t_send
    return rec


def _delta(**delta: object) -> dict[str, object]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


MS = 1_000_000


def test_metric_definitions_on_a_recorded_stream() -> None:
    t0 = 1_000_000_000
    rec = _rec(
        [
            (t0 + 40 * MS, _delta(role="assistant", content="")),  # role-only: not the first token
            (t0 + 50 * MS, _delta(content="a")),
            (t0 + 70 * MS, _delta(content="b")),
            (t0 + 100 * MS, _delta(content="c")),
            (t0 + 101 * MS, {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
            (t0 + 102 * MS, b"[DONE]"),
        ],
        t_send=t0,
    )
    parse(rec)
    assert rec.ok and rec.done
    assert rec.content == "abc"
    assert rec.ttft_s == pytest.approx(0.050)
    assert rec.itls_s == pytest.approx([0.020, 0.030])
    assert rec.output_tokens == 3 and rec.prompt_tokens == 7
    assert rec.e2e_s == pytest.approx(0.103)
    assert rec.tpot_s == pytest.approx((0.103 - 0.050) / 2)
    assert rec.payloads == []  # raw events dropped after the parse


def test_stream_without_done_or_finish_reason_is_truncated() -> None:
    rec = parse(_rec([(1, _delta(content="a"))]))
    assert rec.error == R.ERR_TRUNCATED and not rec.ended_without_done


def test_stream_ending_on_a_finish_reason_without_done_is_complete() -> None:
    # what some OpenAI-compatible servers send: the finish_reason chunk, usage, then the body ends
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    rec = parse(
        _rec(
            [
                (1, _delta(content="a")),
                (2, _delta(content="b")),
                (3, finish),
                (4, {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}),
            ]
        )
    )
    assert rec.ok and rec.finish_reason == "length" and rec.output_tokens == 2
    assert not rec.done and rec.ended_without_done and rec.events == 4


def test_error_event_mid_stream() -> None:
    rec = parse(
        _rec(
            [
                (1, _delta(content="a")),
                (2, {"error": {"message": "KV transfer failed"}}),
                (3, b"[DONE]"),
            ]
        )
    )
    assert rec.error == R.ERR_STREAM
    assert "KV transfer failed" in rec.error_detail


def test_bad_json_event() -> None:
    rec = parse(_rec([(1, b"{not json"), (2, b"[DONE]")]))
    assert rec.error == R.ERR_BAD_JSON


def test_tool_call_deltas_are_tokens_and_are_joined() -> None:
    rec = parse(
        _rec(
            [
                (
                    1,
                    _delta(
                        tool_calls=[
                            {"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}
                        ]
                    ),
                ),
                (2, _delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a":'}}])),
                (3, _delta(tool_calls=[{"index": 0, "function": {"arguments": "1}"}}])),
                (4, b"[DONE]"),
            ]
        )
    )
    assert len(rec.token_times) == 3
    assert [(c.name, c.arguments) for c in rec.tool_calls] == [("f", '{"a":1}')]
