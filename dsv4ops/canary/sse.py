"""Incremental Server-Sent-Events framing for the streaming hot path.

Only framing happens here (bytes.find, slicing): the JSON in each event is parsed after the stream
ends (`dsv4ops.canary.stream_parse`), so a parse never delays the receipt timestamp of another
stream's event (reference load-generators.md §4.3, §6 G1).
"""

from __future__ import annotations

DONE = b"[DONE]"


class SseSplitter:
    """Feed raw response bytes; get back the complete `data:` payloads, in order."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        # The common case at one event per read: exactly one complete `data: ` line (SGLang's
        # stream at stream_interval 1). Byte tests only, no split, no generator: about half the cost.
        if (
            not self._buf
            and chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-2:] == b"\n\n"
            and b"\r" not in chunk
        ):
            return [chunk[6:-2]]
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:  # CRLF framing is legal SSE; normalise only when it occurs
            buf = buf.replace(b"\r\n", b"\n")
        # One C-level split for the whole read; the pure-Python path only for the rare event
        # that is not a single `data: ` line (comments, `event:` fields, multi-line data).
        parts = buf.split(b"\n\n")
        self._buf = parts.pop()
        if not parts:
            return parts
        out = [p[6:] for p in parts if p[:6] == b"data: "]
        if len(out) == len(parts) and not any(b"\n" in p for p in out):
            return out
        out = []
        for event in parts:
            payload = _data_of(event) if event else None
            if payload is not None:
                out.append(payload)
        return out

    @property
    def pending(self) -> bytes:
        """Bytes received after the last complete event (a truncated stream leaves some)."""
        return self._buf


def _data_of(event: bytes) -> bytes | None:
    """Join the data lines of a multi-line event; None for comment-only or field-only events."""
    lines = [
        line[5:].lstrip(b" ") if line.startswith(b"data:") else None for line in event.split(b"\n")
    ]
    data = [line for line in lines if line is not None]
    return b"\n".join(data) if data else None


def is_token_event(payload: bytes) -> bool:
    """Cheap byte test: does this chat chunk carry output (text, reasoning or a tool-call delta)?

    Used only to stamp the first token live (for the hang watchdog); the exact classification is
    done when the stream is parsed. Tolerates a space after the colon (json.dumps style).
    """
    for key in (b'"content":', b'"reasoning_content":', b'"text":', b'"tool_calls":'):
        i = payload.find(key)
        while i >= 0:
            j = i + len(key)
            if payload[j : j + 1] == b" ":
                j += 1
            head = payload[j : j + 2]
            if key == b'"tool_calls":':
                if head[:1] == b"[" and head != b"[]":
                    return True
            elif head[:1] == b'"' and head != b'""':
                return True
            i = payload.find(key, j)
    return False
