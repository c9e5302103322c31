"""Parse the bodies of the generation endpoints into a Job, a Plan and bootstrap info."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dsv4ops.jsontypes import JSONValue

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
from .logprobs import MAX_TOP_LOGPROBS, LogprobRequest
from .recipe import RECIPE_TOOL_PARSERS

DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's sampling default


class BadRequest(ValueError):
    """The body is not a valid request for this endpoint (HTTP 400)."""


@dataclass(frozen=True)
class Bootstrap:
    host: str | None
    port: int | None
    room: int | None


def _max_tokens(value: object) -> int:
    if value is None:
        return DEFAULT_MAX_NEW_TOKENS
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"max_tokens must be a non-negative integer, got {value!r}")
    return value


def _bootstrap(body: Mapping[str, object]) -> Bootstrap:
    host, port, room = (body.get(k) for k in ("bootstrap_host", "bootstrap_port", "bootstrap_room"))
    # A single request may still carry one-element lists (what the router sends for a
    # one-prompt list); anything else list-valued is a batch and goes through parse_batch.
    host, port, room = (
        v[0] if isinstance(v, list) and len(v) == 1 else v for v in (host, port, room)
    )
    try:
        return Bootstrap(
            None if host is None else str(host),
            _int(port) if port is not None else None,
            _int(room) if room is not None else None,
        )
    except (TypeError, ValueError):
        raise BadRequest(
            "bootstrap_host/bootstrap_port/bootstrap_room: expected one value " "per request"
        ) from None


def _int(value: object) -> int:
    """`int(value)` of a JSON scalar; a list or an object is a TypeError, as int() raises."""
    if isinstance(value, str | int | float):
        return int(value)
    raise TypeError(f"int() argument must be a string or a number, not {type(value).__name__!r}")


def _stop(value: object) -> tuple[str, ...]:
    """`stop`: a string or a list of strings (protocol.py; sampling_params.py normalizes a string
    into a one-element list)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise BadRequest(f"stop must be a string or a list of strings, got {value!r}")


def _logprobs(kind: str, body: Mapping[str, object]) -> LogprobRequest:
    """chat: `logprobs: true` + `top_logprobs`; completions: `logprobs: N`; /generate:
    `return_logprob` + `top_logprobs_num` (protocol.py, io_struct.py)."""
    if kind == "chat":
        on, top = body.get("logprobs") is True, body.get("top_logprobs")
    elif kind == "completion":
        top = body.get("logprobs")
        on = top is not None
    else:
        on, top = body.get("return_logprob") is True, body.get("top_logprobs_num")
    top = 0 if top is None else top
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= MAX_TOP_LOGPROBS:
        raise BadRequest(f"top_logprobs must be an integer 0..{MAX_TOP_LOGPROBS}, got {top!r}")
    return LogprobRequest(on, top)


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


@dataclass(frozen=True)
class Parsers:
    """The server's --tool-call-parser / --reasoning-parser and the twin's reasoning length."""

    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    reasoning_tokens: int = DEFAULT_REASONING_TOKENS


def _thinking(body: Mapping[str, object]) -> bool:
    """DSV4's reasoning is `explicit_thinking`: on only for chat_template_kwargs.thinking true
    (reasoning_parser.py DeepSeekV4Detector, serving_chat.py _get_reasoning_from_request)."""
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise BadRequest("chat_template_kwargs must be an object")
    return kwargs is not None and kwargs.get("thinking") is True


def _chat_plan(
    body: Mapping[str, object],
    messages: Sequence[Mapping[str, object]],
    max_tokens: int,
    parsers: Parsers,
) -> tuple[Plan, bool]:
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("tools must be a list")
    tool_choice = body.get("tool_choice", "auto")
    tool_parsing = bool(parsers.tool_call_parser) and bool(tools) and tool_choice != "none"
    options = ChatOptions(
        tool_parser=bool(parsers.tool_call_parser),
        reasoning_parser=bool(parsers.reasoning_parser),
        thinking=_thinking(body),
        reasoning_tokens=parsers.reasoning_tokens,
        recipe=tool_parsing and parsers.tool_call_parser in RECIPE_TOOL_PARSERS,
    )
    return plan_chat(messages, tools, tool_choice, max_tokens, options), tool_parsing


def parse(
    kind: str, body: JSONValue, model_name: str, parsers: Parsers | None = None
) -> tuple[Job, Plan, Bootstrap, str]:
    """Raises BadRequest. Returns the job, the answer plan, bootstrap fields and the prompt.

    `parsers`: the server's; without them, as SGLang without --tool-call-parser."""
    parsers = parsers or Parsers()
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    stream = bool(body.get("stream", False))
    opts = body.get("stream_options") or {}
    include_usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
    tool_parsing = False
    stop = _stop(body.get("stop")) if kind != "generate" else ()
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
        stop = _stop(params.get("stop"))
        plan = plan_completion(prompt, max_tokens)
        rid = str(body.get("rid") or uuid.uuid4().hex)
        stream = bool(body.get("stream", False))
    n_prompt = (
        len(body["input_ids"])
        if kind == "generate" and "input_ids" in body and not isinstance(body.get("text"), str)
        else count_tokens(prompt)
    )
    job = Job(
        kind=kind,
        rid=rid,
        model=str(body.get("model") or model_name),
        stream=stream,
        include_usage=include_usage,
        prompt_tokens=n_prompt,
        max_tokens=max_tokens,
        created=int(time.time()),
        tool_parsing=tool_parsing,
        recipe=kind == "chat" and parsers.tool_call_parser in RECIPE_TOOL_PARSERS,
        stop=stop,
        logprobs=_logprobs(kind, body),
    )
    return job, plan, _bootstrap(body), prompt


@dataclass(frozen=True)
class Sub:
    """One sequence of a batched request: choice `index`, with its own rid and bootstrap."""

    index: int
    prompt_index: int
    job: Job
    plan: Plan
    boot: Bootstrap
    prompt: str
    shares_room: bool  # a parallel sample: 0.5.23 gives it the room of its prompt


@dataclass(frozen=True)
class Batch:
    kind: str
    n: int
    stream: bool
    include_usage: bool
    subs: list[Sub]
    primers: list[Sub]  # per prompt when n > 1: the prefix-caching request (max_new_tokens 0)


def _n(kind: str, body: Mapping[str, object]) -> int:
    params = body.get("sampling_params") if kind == "generate" else body
    value = (params or {}).get("n", 1) if isinstance(params, dict) else 1
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise BadRequest(f"n must be a positive integer, got {value!r}")
    return value


def _prompts(kind: str, body: Mapping[str, object]) -> list[object] | None:
    """The batch of prompts, or None for a single prompt."""
    if kind == "completion":
        p = body.get("prompt")
        if isinstance(p, list) and p and isinstance(p[0], str | list):
            return p
    elif kind == "generate":
        t, ids = body.get("text"), body.get("input_ids")
        if isinstance(t, list):
            return t
        if isinstance(ids, list) and ids and isinstance(ids[0], list):
            return ids
    return None


def _spread(value: object, num: int, n: int, *, room: bool) -> list[object]:
    """io_struct.py `_normalize_bootstrap_params` (L907-939), verbatim in effect."""
    if value is None:
        return [None] * num
    if isinstance(value, list):
        return value * n
    if not room:
        return [value] * num
    if isinstance(value, int | float):  # a room of another type fails here, as `value + i` did
        return [value + i for i in range(num)]
    raise TypeError(f"unsupported operand type(s) for +: {type(value).__name__!r} and 'int'")


def parse_batch(
    kind: str, body: JSONValue, model_name: str, parsers: Parsers | None = None
) -> Batch | None:
    """A request SGLang runs as a batch (a list of prompts, or n > 1), else None.

    Follows 0.5.23's TokenizerManager: with n > 1 each prompt first sends a prefix-caching
    request, then n samples that are copies of the prompt's request, so every sample carries
    the prompt's bootstrap room (tokenizer_manager.py L2128-2172; fixed after 0.5.23 by sglang
    PRs #26486/#30723). Raises BadRequest.
    """
    if not isinstance(body, dict):
        return None
    n = _n(kind, body)
    prompts = _prompts(kind, body)
    if prompts is None and n == 1:
        return None
    if prompts is not None and len(prompts) == 1 and n == 1:
        return None  # a one-element list is a single request
    batch_prompts = prompts if prompts is not None else [None]
    if any(isinstance(p, str) and not p for p in batch_prompts) or not batch_prompts:
        raise BadRequest("Prompt cannot be empty")
    size = len(batch_prompts)
    num = size * n
    hosts = _spread(body.get("bootstrap_host"), num, n, room=False)
    ports = _spread(body.get("bootstrap_port"), num, n, room=False)
    rooms = _spread(body.get("bootstrap_room"), num, n, room=True)
    base_rid = body.get("rid")
    subs: list[Sub] = []
    primers: list[Sub] = []
    for i, prompt_v in enumerate(batch_prompts):
        one = {
            k: v
            for k, v in body.items()
            if k not in ("bootstrap_host", "bootstrap_port", "bootstrap_room", "rid", "n")
        }
        if prompt_v is not None:
            one[
                {"completion": "prompt", "generate": "text"}[kind]
                if isinstance(prompt_v, str)
                else {"completion": "prompt", "generate": "input_ids"}[kind]
            ] = prompt_v
            if kind == "generate" and not isinstance(prompt_v, str):
                one.pop("text", None)
        boot = {"bootstrap_host": hosts[i], "bootstrap_port": ports[i], "bootstrap_room": rooms[i]}
        if n > 1:
            primer_job, plan, pboot, prompt = parse(
                kind, {**one, **boot, "rid": uuid.uuid4().hex}, model_name, parsers
            )
            primers.append(Sub(i, i, primer_job, plan, pboot, prompt, False))
        for j in range(n):
            if n == 1:
                rid = f"{base_rid}_{i}" if isinstance(base_rid, str) else uuid.uuid4().hex
            else:
                rid = uuid.uuid4().hex  # regenerate_rid()
            job, plan, sboot, prompt = parse(kind, {**one, **boot, "rid": rid}, model_name, parsers)
            subs.append(Sub(i * n + j, i, job, plan, sboot, prompt, shares_room=n > 1))
    first = subs[0].job
    return Batch(kind, n, first.stream, first.include_usage, subs, primers)
