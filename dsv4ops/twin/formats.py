"""Response bodies of SGLang 0.5.23's generation endpoints (OpenAI chat/completions, /generate).

One formatter per endpoint, each able to render a whole response or SSE chunks token by token.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from .engine import Piece

VOCAB_SIZE = 129280  # DSV4 tokenizer size; output_ids are stand-ins


def sse(obj: Any) -> bytes:
    payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


def token_id(piece: str) -> int:
    return int.from_bytes(hashlib.sha256(piece.encode()).digest()[:4], "big") % VOCAB_SIZE


@dataclass
class Job:
    """A parsed generation request."""

    kind: str  # chat | completion | generate
    rid: str
    model: str
    stream: bool
    include_usage: bool
    prompt_tokens: int
    max_tokens: int
    created: int
    started: float = field(default_factory=time.monotonic)  # for meta_info.e2e_latency


def _text_and_call(pieces: list[Piece]) -> tuple[str, str | None, str]:
    text = "".join(p for k, p in pieces if k == "text")
    name = next((p for k, p in pieces if k == "tool_header"), None)
    args = "".join(p for k, p in pieces if k == "args")
    return text, name, args


def _usage(job: Job, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": job.prompt_tokens, "completion_tokens": completion,
            "total_tokens": job.prompt_tokens + completion, "prompt_tokens_details": None,
            "reasoning_tokens": 0}


def call_id(rid: str) -> str:
    return "call_" + hashlib.sha256(rid.encode()).hexdigest()[:24]


class ChatFormat:
    def __init__(self, job: Job) -> None:
        self.job = job

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.job.rid, "object": "chat.completion.chunk", "created": self.job.created,
                "model": self.job.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish, "matched_stop": None}]}

    def start(self) -> list[bytes]:
        return [sse(self._chunk({"role": "assistant", "content": ""}))]

    def token(self, piece: Piece) -> bytes:
        kind, value = piece
        if kind == "text":
            return sse(self._chunk({"content": value}))
        if kind == "tool_header":
            call = {"index": 0, "id": call_id(self.job.rid), "type": "function",
                    "function": {"name": value, "arguments": ""}}
            return sse(self._chunk({"content": None, "tool_calls": [call]}))
        return sse(self._chunk({"tool_calls": [{"index": 0, "function": {"arguments": value}}]}))

    def end(self, finish: str, completion: int) -> list[bytes]:
        out = [sse(self._chunk({}, finish))]
        if self.job.include_usage:
            out.append(sse({"id": self.job.rid, "object": "chat.completion.chunk",
                            "created": self.job.created, "model": self.job.model,
                            "choices": [], "usage": _usage(self.job, completion)}))
        return out

    def full(self, pieces: list[Piece], finish: str) -> dict[str, Any]:
        text, name, args = _text_and_call(pieces)
        calls = None
        if name is not None:
            calls = [{"id": call_id(self.job.rid), "index": 0, "type": "function",
                      "function": {"name": name, "arguments": args}}]
        message = {"role": "assistant", "content": None if calls else text,
                   "reasoning_content": None, "tool_calls": calls}
        return {"id": self.job.rid, "object": "chat.completion", "created": self.job.created,
                "model": self.job.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": finish, "matched_stop": None}],
                "usage": _usage(self.job, len(pieces)), "metadata": {"weight_version": "default"}}


class CompletionFormat:
    def __init__(self, job: Job) -> None:
        self.job = job

    def _chunk(self, text: str, finish: str | None) -> dict[str, Any]:
        return {"id": self.job.rid, "object": "text_completion", "created": self.job.created,
                "model": self.job.model,
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": finish, "matched_stop": None}]}

    def start(self) -> list[bytes]:
        return []

    def token(self, piece: Piece) -> bytes:
        return sse(self._chunk(piece[1], None))

    def end(self, finish: str, completion: int) -> list[bytes]:
        out = [sse(self._chunk("", finish))]
        if self.job.include_usage:
            out.append(sse({"id": self.job.rid, "object": "text_completion",
                            "created": self.job.created, "model": self.job.model, "choices": [],
                            "usage": _usage(self.job, completion)}))
        return out

    def full(self, pieces: list[Piece], finish: str) -> dict[str, Any]:
        body = self._chunk("".join(p for _, p in pieces), finish)
        body["usage"] = _usage(self.job, len(pieces))
        return body


class GenerateFormat:
    """SGLang's native /generate: streamed chunks carry the cumulative text."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._pieces: list[Piece] = []

    def _body(self, finish: str | None) -> dict[str, Any]:
        n = len(self._pieces)
        reason: dict[str, Any] | None = None
        if finish == "length":
            reason = {"type": "length", "length": n}
        elif finish in ("stop", "tool_calls"):
            reason = {"type": "stop", "matched": None}
        elif finish == "abort":
            reason = {"type": "abort", "message": "Abort request"}
        return {"text": "".join(p for _, p in self._pieces),
                "output_ids": [token_id(p) for _, p in self._pieces],
                "meta_info": {"id": self.job.rid, "finish_reason": reason,
                              "prompt_tokens": self.job.prompt_tokens, "completion_tokens": n,
                              "cached_tokens": 0, "reasoning_tokens": 0,
                              "weight_version": "default", "num_retractions": 0,
                              "e2e_latency": time.monotonic() - self.job.started}}

    def start(self) -> list[bytes]:
        return []

    def token(self, piece: Piece) -> bytes:
        self._pieces.append(piece)
        return sse(self._body(None))

    def end(self, finish: str, completion: int) -> list[bytes]:
        return [sse(self._body(finish))]

    def full(self, pieces: list[Piece], finish: str) -> dict[str, Any]:
        self._pieces = list(pieces)
        return self._body(finish)


FORMATS = {"chat": ChatFormat, "completion": CompletionFormat, "generate": GenerateFormat}


def error_body(message: str, code: int, kind: str = "BadRequestError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}
