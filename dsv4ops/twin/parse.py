"""Parse the bodies of the generation endpoints into a Job, a Plan and bootstrap info."""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .content import (
    DEFAULT_REASONING_TOKENS,
    ChatOptions,
    Plan,
    count_tokens,
    plan_chat,
    plan_completion,
    prompt_of_messages,
)
from .formats import Job

DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's sampling default


class BadRequest(ValueError):
    """The body is not a valid request for this endpoint (HTTP 400)."""


@dataclass(frozen=True)
class Bootstrap:
    host: str | None
    port: int | None
    room: int | None


def _max_tokens(value: Any) -> int:
    if value is None:
        return DEFAULT_MAX_NEW_TOKENS
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"max_tokens must be a non-negative integer, got {value!r}")
    return value


def _bootstrap(body: dict[str, Any]) -> Bootstrap:
    port = body.get("bootstrap_port")
    room = body.get("bootstrap_room")
    return Bootstrap(body.get("bootstrap_host"), int(port) if port is not None else None,
                     int(room) if room is not None else None)


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


@dataclass(frozen=True)
class Parsers:
    """The server's --tool-call-parser / --reasoning-parser and the twin's reasoning length."""

    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    reasoning_tokens: int = DEFAULT_REASONING_TOKENS


def _thinking(body: dict[str, Any]) -> bool:
    """DSV4's reasoning is `explicit_thinking`: on only for chat_template_kwargs.thinking true
    (reasoning_parser.py DeepSeekV4Detector, serving_chat.py _get_reasoning_from_request)."""
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise BadRequest("chat_template_kwargs must be an object")
    return bool(kwargs) and kwargs.get("thinking") is True


def _chat_plan(body: dict[str, Any], messages: list[Any], max_tokens: int,
               parsers: Parsers) -> tuple[Plan, bool]:
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("tools must be a list")
    tool_choice = body.get("tool_choice", "auto")
    options = ChatOptions(tool_parser=bool(parsers.tool_call_parser),
                          reasoning_parser=bool(parsers.reasoning_parser),
                          thinking=_thinking(body), reasoning_tokens=parsers.reasoning_tokens)
    tool_parsing = bool(parsers.tool_call_parser) and bool(tools) and tool_choice != "none"
    return plan_chat(messages, tools, tool_choice, max_tokens, options), tool_parsing


def parse(kind: str, body: Any, model_name: str,
          parsers: Parsers | None = None) -> tuple[Job, Plan, Bootstrap, str]:
    """Raises BadRequest. Returns the job, the answer plan, bootstrap fields and the prompt.

    `parsers`: the server's; without them, as SGLang without --tool-call-parser."""
    parsers = parsers or Parsers()
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    stream = bool(body.get("stream", False))
    opts = body.get("stream_options") or {}
    include_usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
    tool_parsing = False
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: field required (a non-empty list)")
        max_tokens = _max_tokens(body.get("max_completion_tokens", body.get("max_tokens")))
        plan, tool_parsing = _chat_plan(body, messages, max_tokens, parsers)
        prompt = prompt_of_messages(messages)
        rid = str(body.get("rid") or f"chatcmpl-{uuid.uuid4().hex}")
    elif kind == "completion":
        prompt_v = body.get("prompt")
        if isinstance(prompt_v, list) and len(prompt_v) == 1 and isinstance(prompt_v[0], str):
            prompt_v = prompt_v[0]
        if not isinstance(prompt_v, str):
            raise BadRequest("prompt: a string is required")
        prompt = prompt_v
        max_tokens = _max_tokens(body.get("max_tokens", 16))
        plan = plan_completion(prompt, max_tokens)
        rid = str(body.get("rid") or f"cmpl-{uuid.uuid4().hex}")
    else:
        text, ids = body.get("text"), body.get("input_ids")
        if isinstance(text, str):
            prompt = text
        elif isinstance(ids, list) and all(isinstance(i, int) for i in ids):
            prompt = " ".join(map(str, ids))
        else:
            raise BadRequest("Either text or input_ids should be provided (a single request)")
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        max_tokens = _max_tokens(params.get("max_new_tokens"))
        plan = plan_completion(prompt, max_tokens)
        rid = str(body.get("rid") or uuid.uuid4().hex)
        stream = bool(body.get("stream", False))
    n_prompt = len(body["input_ids"]) if kind == "generate" and "input_ids" in body \
        and not isinstance(body.get("text"), str) else count_tokens(prompt)
    job = Job(kind=kind, rid=rid, model=str(body.get("model") or model_name), stream=stream,
              include_usage=include_usage, prompt_tokens=n_prompt, max_tokens=max_tokens,
              created=int(time.time()), tool_parsing=tool_parsing)
    return job, plan, _bootstrap(body), prompt
