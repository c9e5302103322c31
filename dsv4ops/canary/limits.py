"""What the server will serve, read before a judge sends load, so that every request it sends
is one the server can serve (issue 38: a watch probe asking max_tokens=100000 of a 2048-token
model was refused once a second and the wedge detector never ran).

* Reachability: the router's `/v1/models`, retried within a budget (one request lost 6 s after
  a passing probe must not fail a deploy's gate), a CanaryError with what was seen otherwise.
* Limits: each worker's context length (`/v1/models` `max_model_len`, else `/server_info`) and
  running-request cap (`/server_info`). sglang-router 0.3.2's own `/v1/models` card carries no
  `max_model_len` (measured behind the real router), so the workers are asked.
* Sizing: `ServerLimits.fit` lowers a body's `max_tokens` so that the prompt, estimated high,
  plus the completion fits the context. The estimate is the request's JSON bytes (a token is at
  least one byte in every tokenizer the box uses) plus room for the chat template's own tokens;
  an estimate that is still short shows as a refusal, counted and named (never hidden).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

# Tokens the chat template adds around the messages (DSV4's template with tools adds its DSML
# instructions): counted against the context on top of the request's own bytes.
TEMPLATE_ALLOWANCE_TOKENS = 512
# A completion room below this is not a request worth sending smaller: it goes as asked, and
# the server's refusal is what the judge reports.
MIN_COMPLETION_TOKENS = 8


class LimitsRecord(TypedDict):
    """The limits as report.json records them (ServerLimits.to_json)."""

    context_length: int | None
    max_running_requests: int | None
    source: str
    decode_context_length: int | None
    decode_context_explicit: bool | None


@dataclass(frozen=True)
class ServerLimits:
    """The smallest limits of the workers that answered; None where none said."""

    context_length: int | None = None
    max_running_requests: int | None = None
    source: str = "not read"
    # The decode's own (its /server_info says disaggregation_mode decode): the DSV4 decode graph
    # width follows it (sglang#40442), so a sweep records it; `decode_context_explicit` says
    # whether it was started with --context-length (else SGLang took the model's).
    decode_context_length: int | None = None
    decode_context_explicit: bool | None = None

    def room(self, body: Mapping[str, object]) -> int | None:
        """Completion tokens that fit beside this body's prompt (estimated high)."""
        if self.context_length is None:
            return None
        prompt = json.dumps(
            [body.get("messages"), body.get("prompt"), body.get("tools")], ensure_ascii=False
        )
        return self.context_length - len(prompt.encode()) - TEMPLATE_ALLOWANCE_TOKENS

    def fit(self, body: Mapping[str, object]) -> tuple[Mapping[str, object], int | None]:
        """(the body to send, the max_tokens asked for when it was lowered, else None)."""
        asked = body.get("max_tokens")
        room = self.room(body)
        if room is None or not isinstance(asked, int) or asked <= room:
            return body, None
        if room < MIN_COMPLETION_TOKENS:
            return body, None
        return {**body, "max_tokens": room}, asked

    def to_json(self) -> LimitsRecord:
        return {
            "context_length": self.context_length,
            "max_running_requests": self.max_running_requests,
            "source": self.source,
            "decode_context_length": self.decode_context_length,
            "decode_context_explicit": self.decode_context_explicit,
        }

    def decode_context(self) -> dict[str, int | bool | None]:
        """What a sweep records of the decode's context length."""
        return {
            "context_length": self.decode_context_length,
            "explicit": self.decode_context_explicit,
        }


_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"')


def server_message(text: str) -> str:
    """The server's own message in an error body, however wrapped (SGLang's ErrorResponse, its
    `{"error": {"message": ...}}`, or the router's re-wrapping of either, which is not JSON:
    `data: {'error': {"message":{"object":"error","message":"..."`); else the text."""
    for m in _MESSAGE.finditer(text):
        try:
            return str(json.loads(f'"{m.group(1)}"'))
        except ValueError:
            continue
    return " ".join(text.split())
