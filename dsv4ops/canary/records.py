"""Per-request records: raw receipt timestamps from the hot path, parsed after the stream ends.

Metric definitions (explicit, because tools disagree; reference load-generators.md §3):
* TTFT: send → first event carrying content, reasoning or a tool-call delta (not a role-only chunk).
* ITL: the gap between consecutive output events (one event per decode step in SGLang).
* TPOT: (E2E − TTFT) / (output_tokens − 1), output_tokens from `usage.completion_tokens` when sent.
* E2E: send → end of the response body.
* queue wait: slot wait before send (closed loop), reported separately so TTFT excludes it.

Outcomes (each request has exactly one; `stats.summarize` counts them apart):
* completed: the body ended cleanly with `data: [DONE]`, or without it after a chunk carrying a
  `finish_reason` (some OpenAI-compatible servers never send `[DONE]`; `done` says which);
* cancelled: cut on purpose by the canary itself (the end of a sweep, the abort cascade's client
  disconnects), error `cancelled`: not a failure, and not complete either;
* failed: any other error, including a watchdog cut (`hang_<kind>`) and `truncated`: a body that
  ended cleanly with neither `[DONE]` nor a `finish_reason` (cut mid-answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.canary.sse import DONE
from dsv4ops.canary.toolcalls import ToolCall, assemble
from dsv4ops.jsontypes import JSONObject

try:  # orjson parses a chunk ~5x faster; it comes with sglang-router. json is the fallback.
    from orjson import JSONDecodeError as _JSONError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
    _JSONError = ValueError  # type: ignore[assignment,misc]

# Error kinds (stable strings: counted in reports and named in verdict reasons).
ERR_HTTP = "http_status"
ERR_CONNECT = "connect"
ERR_DISCONNECT = "disconnected"
ERR_TIMEOUT = "timeout"
ERR_STREAM = "stream_error"
ERR_TRUNCATED = "truncated"
ERR_BAD_JSON = "bad_event_json"
ERR_CANCELLED = "cancelled"


def hang_error(kind: str) -> str:
    """The error of a stream the client's watchdog cut, by the watchdog's kind ("hang_stall")."""
    return f"hang_{kind}"


class RecordExtra(TypedDict, total=False):
    """What the client adds to a record beside the stream."""

    hang: str  # the watchdog's kind, when it cut the stream
    max_tokens_asked: int  # the request's max_tokens, when the server's limits lowered it


@dataclass
class RequestRecord:
    """One streamed request. Times are `perf_counter_ns` values."""

    rid: str
    tag: str = ""  # suite phase / concurrency level
    t_queued: int = 0
    t_send: int = 0
    t_first: int = 0  # first output event, stamped live
    t_last: int = 0  # last bytes received, stamped live (the watchdog reads it)
    t_end: int = 0
    status: int = 0
    error: str | None = None
    error_detail: str = ""
    times: list[int] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    # filled by parse()
    token_times: list[int] = field(default_factory=list)
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    usage_tokens: int | None = None
    done: bool = False
    events: int = 0  # SSE events received (the raw lists are dropped after the parse)
    extra: RecordExtra = field(default_factory=lambda: RecordExtra())

    @property
    def ok(self) -> bool:
        """Completed: the stream ended the way a finished answer ends (see the module docstring)."""
        return self.error is None

    @property
    def cancelled(self) -> bool:
        """Cut on purpose by the canary (not a failure; its tokens were still received)."""
        return self.error == ERR_CANCELLED

    @property
    def cut_by_watchdog(self) -> bool:
        """Cancelled by the client's watchdog after it flagged the stream: evidence of a hang."""
        hang = self.extra.get("hang")
        return hang is not None and self.error == hang_error(hang)

    @property
    def ended_without_done(self) -> bool:
        """Completed on a finish_reason with no `data: [DONE]` after it."""
        return self.ok and not self.done and self.finish_reason is not None

    @property
    def output_tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else len(self.token_times)

    @property
    def ttft_s(self) -> float | None:
        return (self.token_times[0] - self.t_send) / 1e9 if self.token_times else None

    @property
    def e2e_s(self) -> float | None:
        return (self.t_end - self.t_send) / 1e9 if self.t_end and self.t_send else None

    @property
    def itls_s(self) -> list[float]:
        t = self.token_times
        return [(t[i] - t[i - 1]) / 1e9 for i in range(1, len(t))]

    @property
    def tpot_s(self) -> float | None:
        n = self.output_tokens
        ttft, e2e = self.ttft_s, self.e2e_s
        if n < 2 or ttft is None or e2e is None:
            return None
        return (e2e - ttft) / (n - 1)

    @property
    def queue_wait_s(self) -> float:
        return (self.t_send - self.t_queued) / 1e9 if self.t_queued else 0.0


def parse(rec: RequestRecord, *, keep_payloads: bool = False) -> RequestRecord:
    """Parse the raw events of a finished stream into tokens, text, tool calls and usage."""
    rec.events = len(rec.times)
    deltas: list[JSONObject] = []
    content: list[str] = []
    reasoning: list[str] = []
    for t, payload in zip(rec.times, rec.payloads, strict=True):
        if payload == DONE:
            rec.done = True
            continue
        try:
            obj = _loads(payload)
        except (_JSONError, ValueError):
            _set_error(rec, ERR_BAD_JSON, payload[:120].decode("utf-8", "replace"))
            continue
        if not isinstance(obj, dict):
            _set_error(rec, ERR_BAD_JSON, f"event is {type(obj).__name__}")
            continue
        if "error" in obj or obj.get("object") == "error":
            err = obj.get("error", obj)
            msg = err.get("message", err) if isinstance(err, dict) else err
            _set_error(rec, ERR_STREAM, str(msg)[:200])
            continue
        usage = obj.get("usage")
        if isinstance(usage, dict):
            if usage.get("completion_tokens") is not None:
                rec.usage_tokens = int(usage["completion_tokens"])
            if usage.get("prompt_tokens") is not None:
                rec.prompt_tokens = int(usage["prompt_tokens"])
        output = False
        for choice in obj.get("choices") or ():
            delta = choice.get("delta")
            if delta is None:  # /v1/completions chunks carry `text`
                text = choice.get("text")
                if text:
                    content.append(text)
                    output = True
            else:
                if delta.get("content"):
                    content.append(delta["content"])
                    output = True
                if delta.get("reasoning_content"):
                    reasoning.append(delta["reasoning_content"])
                    output = True
                calls = delta.get("tool_calls")
                if calls:
                    deltas.extend(calls)
                    output = True
            if choice.get("finish_reason"):
                rec.finish_reason = choice["finish_reason"]
        if output:
            rec.token_times.append(t)
    rec.content = "".join(content)
    rec.reasoning = "".join(reasoning)
    rec.tool_calls = assemble(deltas)
    if rec.error is None and not rec.done and rec.finish_reason is None:
        # A finish_reason is the model's own "this answer is over": a server that then closes the
        # body without `[DONE]` delivered a complete answer. Without either, it was cut mid-way.
        _set_error(rec, ERR_TRUNCATED, "stream ended without a finish_reason or data: [DONE]")
    if not keep_payloads:
        rec.times = []
        rec.payloads = []
    return rec


def _set_error(rec: RequestRecord, kind: str, detail: str) -> None:
    if rec.error is None:
        rec.error = kind
        rec.error_detail = detail
