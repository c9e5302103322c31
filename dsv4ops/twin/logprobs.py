"""`logprobs` in SGLang 0.5.23's shapes, as the real server answered them (docs/twin.md, "Measured
against the real server"): chat `{"content": [{token, bytes, logprob, top_logprobs: [{token,
bytes, logprob}]}]}` per chunk (null on the role and finish chunks), completions `{text_offset,
token_logprobs, tokens, top_logprobs: [{token: logprob}]}` (text_offset -1, as 0.5.23 writes it),
/generate `meta_info.output_token_logprobs: [[logprob, id, null]]` and `output_top_logprobs`.

The values are stand-ins, seeded by the token: the chosen token's logprob in [-2, 0], each
alternative lower, so a client cannot take 0.0 for granted. Alternatives have empty text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TypedDict

MAX_TOP_LOGPROBS = 20  # protocol.py: top_logprobs 0..20


@dataclass(frozen=True)
class LogprobRequest:
    on: bool = False
    top: int = 0


def _value(text: str, rank: int) -> float:
    h = int.from_bytes(hashlib.sha256(f"{rank}\x1f{text}".encode()).digest()[:4], "big")
    base = -2.0 * (h / 0xFFFFFFFF)
    return round(base - 8.0 * rank, 4)


def _alternatives(text: str, top: int) -> list[tuple[str, float]]:
    return [(text, _value(text, 0))] + [("", _value(text, r)) for r in range(1, top)]


class ChatTop(TypedDict):
    """One alternative of a chat token."""

    token: str
    bytes: list[int]
    logprob: float


class ChatEntry(ChatTop):
    """One chat token, with its alternatives."""

    top_logprobs: list[ChatTop]


class ChatLogprobs(TypedDict):
    content: list[ChatEntry]


class CompletionLogprobs(TypedDict):
    text_offset: list[int]
    token_logprobs: list[float]
    tokens: list[str]
    top_logprobs: list[dict[str, float]]


class GenerateLogprobs(TypedDict):
    """/generate's meta_info keys: `[logprob, token id, null]` per token."""

    input_token_logprobs: list[list[float | int | None]]
    output_token_logprobs: list[list[float | int | None]]
    output_token_logprobs_length: int
    input_top_logprobs: list[list[list[float | int | None]]]
    output_top_logprobs: list[list[list[float | int | None]]]


def _chat_top(t: str, lp: float) -> ChatTop:
    return {"token": t, "bytes": list(t.encode()), "logprob": lp}


def chat_entry(text: str, top: int) -> ChatEntry:
    return {
        "token": text,
        "bytes": list(text.encode()),
        "logprob": _value(text, 0),
        "top_logprobs": [_chat_top(t, lp) for t, lp in _alternatives(text, top)],
    }


def chat(texts: list[str], top: int) -> ChatLogprobs:
    return {"content": [chat_entry(t, top) for t in texts]}


def completion(texts: list[str], top: int) -> CompletionLogprobs:
    return {
        "text_offset": [-1] * len(texts),
        "token_logprobs": [_value(t, 0) for t in texts],
        "tokens": list(texts),
        "top_logprobs": [dict(_alternatives(t, top)) for t in texts],
    }


def generate(texts: list[str], ids: list[int], top: int) -> GenerateLogprobs:
    tops = [
        [[lp, tid if rank == 0 else 0, None] for rank, (_, lp) in enumerate(_alternatives(t, top))]
        for t, tid in zip(texts, ids, strict=True)
    ]
    return {
        "input_token_logprobs": [],
        "output_token_logprobs": [
            [_value(t, 0), tid, None] for t, tid in zip(texts, ids, strict=True)
        ],
        "output_token_logprobs_length": len(texts),
        "input_top_logprobs": [],
        "output_top_logprobs": tops if top else [],
    }
