"""The streaming hot path: an HTTP/1.1 client built on `asyncio.Protocol`, with keep-alive pooling.

Why not aiohttp here: at one SSE event per socket read (SGLang sends one per decode step per
stream), aiohttp's path per read is parser → StreamReader → future → task wake-up → our loop, about
55-60 µs per event on the 2-core CI machine, which puts 100 streams × 200 tok/s at the edge of one
core and pushes the delivery-lag p99 to 5-10 ms (benchmarks/loadgen_capacity.py). Here the event
loop calls `data_received` directly: receipt stamp, de-chunk, SSE split, two list appends, and no
task wakes until the response ends. The request's task only waits for the end (or is cancelled by
the watchdog or the abort-cascade, which closes the socket: a client disconnect, as SGLang sees it).

Scope: plain `http://` (the router on the box and the twin); TLS, proxies and redirects stay with
aiohttp (`ChatClient` falls back to it for anything else). Responses: chunked, Content-Length or
read-to-close bodies; `Connection: close` honoured; a reused keep-alive connection that the server
closed before answering is retried once on a fresh one (the request was never seen).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from dsv4ops.canary.sse import SseSplitter, is_token_event
from dsv4ops.clock import perf_ns

_MAX_HEAD = 64 * 1024
_MAX_ERROR_BODY = 64 * 1024


class HttpError(Exception):
    """A response that is not HTTP/1.x (garbage, or a head over 64 KiB)."""


class Disconnected(Exception):
    """The connection ended before the response did (`got_bytes`: whether any response byte came)."""

    def __init__(self, detail: str, *, got_bytes: bool) -> None:
        super().__init__(detail)
        self.got_bytes = got_bytes


@dataclass(frozen=True)
class Response:
    """How a streamed response ended (its events went to the sink)."""

    status: int
    error_body: bytes  # the body of a non-200 answer, first 64 KiB


class ConnectTimeout(OSError):
    """No TCP connection within the connect timeout (kept apart from a response that times out)."""


class StreamSink(Protocol):
    """Where a response's events go. `RequestRecord` has exactly these attributes."""

    times: list[int]
    payloads: list[bytes]
    t_first: int
    t_last: int


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one response at a time."""

    def __init__(self, on_idle: Callable[[_Conn], None], on_lost: Callable[[_Conn], None]) -> None:
        self._on_idle, self._on_lost = on_idle, on_lost
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self._reset()

    def _reset(self) -> None:
        self._sink: StreamSink | None = None
        self._done: asyncio.Future[Response] | None = None
        self._head = b""
        self._in_head = True
        self.status = 0
        self._body_mode = ""  # chunked | length | close
        self._left = 0  # bytes left in the current chunk (chunked) or in the body (length)
        self._skip = 0  # CRLF after a chunk's data still to skip
        self._size_line = b""
        self._trailers = False
        self._keep_alive = True
        self._splitter = SseSplitter()
        self.error_body = bytearray()
        self._got = False

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        done = self._done
        if done is not None and not done.done():
            if self._body_mode == "close" and not self._in_head:
                self._finish()  # a read-to-close body ends here
            else:
                detail = (
                    f"ServerDisconnected: {exc}"
                    if exc
                    else "ServerDisconnected: connection closed by peer"
                )
                done.set_exception(Disconnected(detail, got_bytes=self._got))
        self._on_lost(self)

    def data_received(self, data: bytes) -> None:
        t = perf_ns()  # the receipt stamp: first thing, before any parsing
        if self._done is None or self._done.done():
            # Bytes nobody asked for (after the end of a response, on an idle connection): the
            # connection is out of step with the server and must not carry another request.
            if self.transport is not None:
                self.transport.close()
            return
        self._got = True
        sink = self._sink
        if sink is not None:
            sink.t_last = t
        try:
            if self._in_head:
                data = self._parse_head(data)
                if self._in_head or not data or self._done.done():
                    return
            mode = self._body_mode
            if mode == "chunked":
                body, ended = self._dechunk(data)
            elif mode == "length":
                take = data[: self._left]
                self._left -= len(take)
                body, ended = take, self._left == 0
            else:
                body, ended = data, False
            if self.status == 200:
                if body:
                    self._flush_events(body, t)
            elif len(self.error_body) < _MAX_ERROR_BODY:
                self.error_body += body[: _MAX_ERROR_BODY - len(self.error_body)]
            if ended:
                self._finish()
        except HttpError as exc:
            self._keep_alive = False
            self._done.set_exception(exc)
            if self.transport is not None:
                self.transport.abort()

    # -- parsing ------------------------------------------------------------------------------
    def _parse_head(self, data: bytes) -> bytes:
        head = self._head + data if self._head else data
        end = head.find(b"\r\n\r\n")
        if end < 0:
            if len(head) > _MAX_HEAD:
                raise HttpError("response head over 64 KiB")
            self._head = head
            return b""
        lines = head[:end].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise HttpError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            self._head = b""
            return self._parse_head(head[end + 4 :])
        self.status = status
        self._keep_alive = parts[0] == b"HTTP/1.1"
        length = None
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError as exc:
                    raise HttpError(f"bad Content-Length {value.strip()[:40]!r}") from exc
            elif name == b"connection":
                v = value.strip().lower()
                self._keep_alive = v == b"keep-alive" or (self._keep_alive and v != b"close")
        self._in_head = False
        self._head = b""
        if chunked:
            self._body_mode = "chunked"
        elif length is not None:
            self._body_mode, self._left = "length", length
            if length == 0:
                self._finish()
        else:
            self._body_mode, self._keep_alive = "close", False
        return head[end + 4 :]

    def _dechunk(self, data: bytes) -> tuple[bytes, bool]:
        """Body bytes in `data` (chunk framing removed) and whether the last chunk was seen."""
        pieces: list[bytes] = []
        pos, n = 0, len(data)
        while pos < n:
            if not (self._skip or self._left or self._size_line or self._trailers):
                # Fast path: a whole chunk (size line, data, CRLF) inside this read, the usual
                # shape of one SSE event per write.
                end = data.find(b"\r\n", pos)
                if end > pos:
                    try:
                        size = int(data[pos:end], 16)
                    except ValueError:
                        size = 0  # an extension (`;`) or garbage: the general path decides
                    stop = end + 2 + size
                    if size and stop + 2 <= n and data[stop : stop + 2] == b"\r\n":
                        pieces.append(data[end + 2 : stop])
                        pos = stop + 2
                        continue
            if self._skip:
                step = min(self._skip, n - pos)
                pos += step
                self._skip -= step
                continue
            if self._left:
                take = min(self._left, n - pos)
                pieces.append(data[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._skip = 2
                continue
            end = data.find(b"\n", pos)
            if end < 0:
                self._size_line += data[pos:]
                if len(self._size_line) > 1024:
                    raise HttpError("chunk size line over 1 KiB")
                break
            line = (self._size_line + data[pos:end]).strip()
            self._size_line = b""
            pos = end + 1
            if self._trailers:  # after the last chunk: trailer lines, then an empty line
                if not line:
                    return b"".join(pieces), True
                continue
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError as exc:
                raise HttpError(f"bad chunk size line {line[:40]!r}") from exc
            if size == 0:
                self._trailers = True
            else:
                self._left = size
        body = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return body, False

    def _flush_events(self, body: bytes, t: int) -> None:
        sink = self._sink
        if sink is None:
            return
        events = self._splitter.feed(body)
        if events:
            if len(events) == 1:
                sink.times.append(t)
                sink.payloads.append(events[0])
            else:  # a burst in one read: C-level extends, not a Python loop per event
                sink.times.extend([t] * len(events))
                sink.payloads.extend(events)
            if not sink.t_first and any(map(is_token_event, events)):
                sink.t_first = t

    def _finish(self) -> None:
        done = self._done
        if done is None or done.done():
            return  # finished once already: never hand a connection to the pool twice
        keep = self._keep_alive and not self.closed
        self._sink = None
        done.set_result(Response(self.status, bytes(self.error_body)))
        if keep:
            self._on_idle(self)
        elif self.transport is not None and not self.closed:
            self.transport.close()

    # -- used by the pool ---------------------------------------------------------------------
    def start(self, request: bytes, sink: StreamSink) -> asyncio.Future[Response]:
        assert self.transport is not None
        self._reset()
        self._sink = sink
        self._done = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._done

    def abort(self) -> None:
        self._sink = None
        if self.transport is not None and not self.closed:
            self.transport.abort()


class StreamingHttp:
    """A keep-alive pool of `_Conn`s to one `http://host:port`, at most `limit` at a time."""

    def __init__(self, base_url: str, *, limit: int, connect_timeout_s: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"StreamingHttp needs an http:// URL, not {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.host_header = parts.netloc.rsplit("@", 1)[-1].encode()
        self._connect_timeout = connect_timeout_s
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._slots = asyncio.Semaphore(limit)

    @staticmethod
    def supports(base_url: str) -> bool:
        parts = urlsplit(base_url)
        return parts.scheme == "http" and bool(parts.hostname) and not parts.username

    def request_bytes(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {self.host_header.decode()}",
            f"Content-Length: {len(body)}",
        ]
        for k, v in headers.items():
            if any(c in f"{k}{v}" for c in "\r\n"):
                raise ValueError(f"header {k!r} contains a line break")
            head.append(f"{k}: {v}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body

    async def post_stream(self, request: bytes, sink: StreamSink) -> Response:
        """Send `request` and feed the response's SSE events into `sink` as they arrive.

        Raises `Disconnected`, `HttpError` or `OSError` (connect, `ConnectTimeout` included)."""
        async with self._slots:
            for attempt in (0, 1):
                conn = self._idle.pop() if self._idle else await self._connect()
                try:
                    return await conn.start(request, sink)
                except Disconnected as exc:
                    # A keep-alive connection the server had already closed: the request never
                    # reached it, so sending it again on a fresh connection is safe.
                    if attempt == 0 and conn.reused and not exc.got_bytes:
                        continue
                    raise
                except BaseException:
                    conn.abort()  # cancelled (watchdog / abort cascade): a client disconnect
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Conn(self._put_idle, self._forget), self.host, self.port
                ),
                self._connect_timeout,
            )
        except TimeoutError as exc:
            raise ConnectTimeout(
                f"no connection to {self.host}:{self.port} in {self._connect_timeout} s"
            ) from exc
        self._all.add(conn)
        return conn

    def _put_idle(self, conn: _Conn) -> None:
        conn.reused = True
        self._idle.append(conn)

    def _forget(self, conn: _Conn) -> None:
        self._all.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    def close(self) -> None:
        for conn in list(self._all):
            conn.abort()
        self._idle.clear()
