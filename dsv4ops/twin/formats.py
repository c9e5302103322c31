"""Response bodies of SGLang 0.5.23's generation endpoints (OpenAI chat/completions, /generate).

One formatter per endpoint, each able to render a whole response or SSE chunks token by token.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from dsv4ops.jsontypes import JSONObject, JSONValue

from . import logprobs as lp
from .calls import Piece
from .corruption import streamed_fragments
from .dsml import CallEnd, CallPart, CallPiece

VOCAB_SIZE = 129280  # DSV4 tokenizer size; output_ids are stand-ins
# The id a natural end reports as finish_reason.matched / matched_stop: DeepSeek's
# <｜end▁of▁sentence｜> (1 in the V3 tokenizer; V4-Flash's own config not read: UNVERIFIED).
EOS_TOKEN_ID = 1


def sse(obj: JSONValue) -> bytes:
    # compact and UTF-8 as SGLang's msgspec/pydantic encoders write it (DSML's U+FF5C stays raw)
    payload = (
        obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    )
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
    # the request's output runs through the tool-call parser (serving_chat.py
    # _tool_call_parsing_active): --tool-call-parser set, tools given, tool_choice not "none"
    tool_parsing: bool = False
    # served through deepseek-recipe (recipe.RECIPE_TOOL_PARSERS): text in build_sse_content's
    # shape, calls streamed piece by piece while they are decoded
    recipe: bool = False
    stop: tuple[str, ...] = ()  # the request's `stop` strings (sampling_params.stop)
    logprobs: lp.LogprobRequest = field(default_factory=lp.LogprobRequest)


def _usage(job: Job, completion: int, reasoning: int = 0) -> dict[str, int | dict[str, int] | None]:
    """SGLang's UsageInfo (protocol.py), in its key order."""
    return {
        "prompt_tokens": job.prompt_tokens,
        "total_tokens": job.prompt_tokens + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": reasoning,
        "completion_tokens_details": {"reasoning_tokens": reasoning} if reasoning else None,
    }


def call_id() -> str:
    """A fresh id per call, as serving_chat.py _process_tool_call_id does for deepseekv4."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _tool_call(call: str) -> dict[str, object]:
    if not isinstance(call, CallEnd):  # the token that closed the invoke block carries the call
        raise TypeError(f"a tool call is a dsml.CallEnd, not {type(call).__name__}")
    return {
        "id": call_id(),
        "index": call.call_index,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _streamed_call(call: str, fault: str | None) -> list[dict[str, object]]:
    """The call's stream deltas: whole in one, or as the stream_tools hazard breaks it."""
    whole = _tool_call(call)
    if fault is None:
        return [whole]
    assert isinstance(call, CallEnd)  # _tool_call checked it
    parts = streamed_fragments(call.call_index, call.arguments, fault)
    first = [{**whole, "function": {"name": call.name, "arguments": p}} for p in parts[:1]]
    return first + [{"index": call.call_index, "function": {"arguments": p}} for p in parts[1:]]


class ChatFormat:
    """Chat chunks in the two shapes SGLang 0.5.23 writes them (serving_chat.py):
    sse_utils.build_sse_content (role, reasoning, plain content, finish: `reasoning_content` is
    always there, null keys omitted) and the pydantic ChatCompletionStreamResponse (tool-call
    deltas, text from the tool-call parser, usage: every key, `usage: null`)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.reasoning_tokens = 0
        # set by the server from its Req (the stream_tools hazard; engine.Req.stream_fault)
        self.stream_fault: str | None = None

    def _head(self) -> JSONObject:
        return {
            "id": self.job.rid,
            "object": "chat.completion.chunk",
            "created": self.job.created,
            "model": self.job.model,
        }

    def _logprobs(self, texts: list[str]) -> lp.ChatLogprobs | None:
        want = self.job.logprobs
        return lp.chat(texts, want.top) if want.on and texts else None

    def _content_chunk(
        self, delta: JSONObject, finish: str | None = None, matched: str | int | None = None
    ) -> bytes:
        text = delta.get("content")
        choice = {
            "index": 0,
            "delta": {"reasoning_content": None, **delta},
            "logprobs": self._logprobs([text] if text and finish is None else []),
            "finish_reason": finish,
            "matched_stop": matched,
        }
        return sse({**self._head(), "choices": [choice]})

    def _model_chunk(self, content: str | None, calls: list[dict[str, object]] | None) -> bytes:
        delta: JSONObject = {"role": None, "content": content, "reasoning_content": None}
        if calls is not None:
            delta["tool_calls"] = calls
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": self._logprobs([content] if content else []),
            "finish_reason": None,
            "matched_stop": None,
        }
        return sse({**self._head(), "choices": [choice], "usage": None})

    def start(self) -> list[bytes]:
        return [self._content_chunk({"role": "assistant", "content": ""})]

    def _pieces(self, parts: tuple[CallPiece, ...]) -> bytes:
        """The recipe path's pieces, one chunk each (token_output_sse_chunks): the header with
        a fresh id and the name, the later ones with id and name null."""
        return b"".join(
            self._model_chunk(
                None,
                [
                    {
                        "id": call_id() if p.name is not None else None,
                        "index": p.index,
                        "type": "function",
                        "function": {"name": p.name, "arguments": p.arguments},
                    }
                ],
            )
            for p in parts
        )

    def token(self, piece: Piece) -> bytes:
        kind, value = piece
        if kind == "reasoning":
            self.reasoning_tokens += 1
            return self._content_chunk({"reasoning_content": value})
        if kind == "text":
            if self.job.tool_parsing and not self.job.recipe:
                return self._model_chunk(value, None)
            return self._content_chunk({"content": value})
        recipe_stream = self.job.recipe and self.stream_fault is None
        if kind == "call_part":
            assert isinstance(value, CallPart)
            return self._pieces(value.parts) if recipe_stream else b""
        if kind == "call":
            if recipe_stream:
                assert isinstance(value, CallEnd)
                return self._pieces(value.parts)
            deltas = _streamed_call(value, self.stream_fault)
            return b"".join(self._model_chunk(None, [d]) for d in deltas)
        return b""  # hidden: decoded, held by the parser, nothing on the wire

    def end(self, finish: str, completion: int, matched: str | int | None = None) -> list[bytes]:
        out = [self._content_chunk({}, finish, matched)]
        if self.job.include_usage:
            out.append(
                sse(
                    {
                        **self._head(),
                        "choices": [],
                        "usage": _usage(self.job, completion, self.reasoning_tokens),
                    }
                )
            )
        return out

    def full(
        self,
        pieces: list[Piece],
        finish: str,
        completion: int | None = None,
        matched: str | int | None = None,
    ) -> JSONObject:
        text = "".join(p for k, p in pieces if k == "text")
        reasoning = "".join(p for k, p in pieces if k == "reasoning")
        message: JSONObject = {
            "role": "assistant",
            "content": text,
            "reasoning_content": reasoning or None,
        }
        calls = [_tool_call(p) for k, p in pieces if k == "call"]
        if calls:
            message["tool_calls"] = calls
        n_reasoning = sum(1 for k, _ in pieces if k == "reasoning")
        return {
            "id": self.job.rid,
            "object": "chat.completion",
            "created": self.job.created,
            "model": self.job.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": self._logprobs([p for k, p in pieces if k == "text"]),
                    "finish_reason": finish,
                    # a whole response with calls drops it (serving_chat.py L3211-3213,
                    # seen on the real server); the stream's finish chunk keeps the EOS id
                    "matched_stop": None if finish == "tool_calls" else matched,
                }
            ],
            "usage": _usage(
                self.job, len(pieces) if completion is None else completion, n_reasoning
            ),
            "metadata": {"weight_version": "default"},
        }


class CompletionFormat:
    stream_fault: str | None = None  # no tool calls here (ChatFormat's)

    def __init__(self, job: Job) -> None:
        self.job = job

    def _chunk(
        self,
        text: str,
        finish: str | None,
        matched: str | int | None = None,
        tokens: list[str] | None = None,
    ) -> JSONObject:
        want = self.job.logprobs
        logprobs = lp.completion(tokens, want.top) if want.on and tokens else None
        return {
            "id": self.job.rid,
            "object": "text_completion",
            "created": self.job.created,
            "model": self.job.model,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": logprobs,
                    "finish_reason": finish,
                    "matched_stop": matched,
                }
            ],
        }

    def start(self) -> list[bytes]:
        return []

    def token(self, piece: Piece) -> bytes:
        return sse(self._chunk(piece[1], None, tokens=[piece[1]]))

    def end(self, finish: str, completion: int, matched: str | int | None = None) -> list[bytes]:
        out = [sse(self._chunk("", finish, matched))]
        if self.job.include_usage:
            out.append(
                sse(
                    {
                        "id": self.job.rid,
                        "object": "text_completion",
                        "created": self.job.created,
                        "model": self.job.model,
                        "choices": [],
                        "usage": _usage(self.job, completion),
                    }
                )
            )
        return out

    def full(
        self,
        pieces: list[Piece],
        finish: str,
        completion: int | None = None,
        matched: str | int | None = None,
    ) -> JSONObject:
        body = self._chunk(
            "".join(p for _, p in pieces), finish, matched, tokens=[p for _, p in pieces]
        )
        body["usage"] = _usage(self.job, len(pieces) if completion is None else completion)
        return body


class GenerateFormat:
    """SGLang's native /generate: streamed chunks carry the cumulative text."""

    stream_fault: str | None = None  # no tool calls here (ChatFormat's)

    def __init__(self, job: Job) -> None:
        self.job = job
        self._pieces: list[Piece] = []
        self._completion: int | None = None  # the token count once known (stop strings cut)

    def _body(self, finish: str | None, matched: str | int | None = None) -> JSONObject:
        n = len(self._pieces) if self._completion is None else self._completion
        reason: dict[str, object] | None = None
        if finish == "length":
            reason = {"type": "length", "length": n}
        elif finish in ("stop", "tool_calls"):
            reason = {"type": "stop", "matched": matched}
        elif finish == "abort":
            # FINISH_ABORT.to_json (schedule_batch.py L332-345), as the real server answered an
            # /abort_request'ed /generate (tools/sglang-cpu/README.md)
            reason = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
        ids = [token_id(p) for _, p in self._pieces]
        want = self.job.logprobs
        logprobs: Mapping[str, object] = {}
        if want.on:
            logprobs = lp.generate([p for _, p in self._pieces], ids, want.top)
        return {
            "text": "".join(p for _, p in self._pieces),
            "output_ids": ids,
            "meta_info": {
                "id": self.job.rid,
                "finish_reason": reason,
                "prompt_tokens": self.job.prompt_tokens,
                "completion_tokens": n,
                "cached_tokens": 0,
                "reasoning_tokens": 0,
                "weight_version": "default",
                "num_retractions": 0,
                **logprobs,
                "e2e_latency": time.monotonic() - self.job.started,
            },
        }

    def start(self) -> list[bytes]:
        return []

    def token(self, piece: Piece) -> bytes:
        self._pieces.append(piece)
        return sse(self._body(None))

    def end(self, finish: str, completion: int, matched: str | int | None = None) -> list[bytes]:
        self._completion = completion
        return [sse(self._body(finish, matched))]

    def full(
        self,
        pieces: list[Piece],
        finish: str,
        completion: int | None = None,
        matched: str | int | None = None,
    ) -> JSONObject:
        self._pieces = list(pieces)
        self._completion = completion
        return self._body(finish, matched)


FORMATS: dict[str, type[ChatFormat] | type[CompletionFormat] | type[GenerateFormat]] = {
    "chat": ChatFormat,
    "completion": CompletionFormat,
    "generate": GenerateFormat,
}


def error_body(message: str, code: int, kind: str = "BadRequestError") -> dict[str, object]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}
