from __future__ import annotations

import pytest

from dsv4ops.canary.sse import SseSplitter, is_token_event

# Recorded from an SGLang-style chat stream (pydantic JSON: no spaces), cut at awkward places.
RECORDED = (
    b'data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.mark.parametrize("cut", [1, 7, 50, 120, 200, len(RECORDED) - 3])
def test_events_survive_any_chunk_boundary(cut: int) -> None:
    s = SseSplitter()
    events = s.feed(RECORDED[:cut]) + s.feed(RECORDED[cut:])
    assert len(events) == 4
    assert events[-1] == b"[DONE]"
    assert s.pending == b""


def test_byte_by_byte_feed_gives_the_same_events() -> None:
    s = SseSplitter()
    events = [e for i in range(len(RECORDED)) for e in s.feed(RECORDED[i : i + 1])]
    assert events == SseSplitter().feed(RECORDED)


def test_crlf_comments_and_multiline_data() -> None:
    s = SseSplitter()
    raw = b": keep-alive\r\n\r\nevent: x\r\ndata: a\r\ndata: b\r\n\r\ndata:c\n\n"
    assert s.feed(raw) == [b"a\nb", b"c"]


def test_truncated_stream_leaves_pending_bytes() -> None:
    s = SseSplitter()
    assert s.feed(b'data: {"a":1}\n\ndata: {"b"') == [b'{"a":1}']
    assert s.pending == b'data: {"b"'


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"choices":[{"delta":{"role":"assistant","content":""}}]}', False),
        (b'{"choices":[{"delta":{"content":"x"}}]}', True),
        (b'{"choices":[{"delta": {"content": " x"}}]}', True),  # json.dumps spacing
        (b'{"choices":[{"delta":{"content":null,"tool_calls":[{"index":0}]}}]}', True),
        (b'{"choices":[{"delta":{"tool_calls":[]}}]}', False),
        (b'{"choices":[{"delta":{"reasoning_content":"hm"}}]}', True),
        (b'{"choices":[],"usage":{"completion_tokens":3}}', False),
    ],
)
def test_token_event_byte_test(payload: bytes, expected: bool) -> None:
    assert is_token_event(payload) is expected
