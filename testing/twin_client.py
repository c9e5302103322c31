"""Client-side helpers for twin tests: SSE parsing, chat-stream assembly, fake bootstrap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather",
    "description": "weather for a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}, "nonce": {"type": "string"},
                                  "pad": {"type": "string"}},
                   "required": ["city", "nonce"]}}}


def sse_events(lines: Iterator[str]) -> list[Any]:
    """Parse `data:` lines of an SSE stream; '[DONE]' is kept as the string."""
    out: list[Any] = []
    for line in lines:
        if line.startswith("data:"):
            payload = line[5:].strip()
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def assemble_chat_stream(events: list[Any]) -> dict[str, Any]:
    """Rebuild content, the tool call and the finish reason from chat.completion.chunk events."""
    content, name, call_id, args, finish = "", None, None, "", None
    for ev in events:
        if ev == "[DONE]" or not ev.get("choices"):
            continue
        choice = ev["choices"][0]
        delta = choice.get("delta") or {}
        content += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") or {}
            if fn.get("name"):
                name, call_id = fn["name"], call.get("id")
            args += fn.get("arguments") or ""
        finish = choice.get("finish_reason") or finish
    return {"content": content, "name": name, "id": call_id, "arguments": args, "finish": finish}


def stream_chat(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    with client.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    return assemble_chat_stream(events)


def fake_bootstrap() -> dict[str, Any]:
    return {"bootstrap_host": "2.2.2.2", "bootstrap_port": 0, "bootstrap_room": 0}
