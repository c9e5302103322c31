"""A real TCP server on 127.0.0.1 that answers each request with scripted byte pieces, each in its
own write with a pause in between (the rawhttp client tests). It counts connections, requests
and disconnects, so keep-alive reuse is observable from outside."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from testing.ports import free_port

Script = Callable[[int, bytes], Sequence[bytes | float | None]]  # (request n, body) → pieces
# A piece is bytes to write, a float to sleep, or None to close the connection right there.


class ScriptedServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.disconnects = 0
        self.port = free_port()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                for piece in self.script(len(self.requests) - 1, body):
                    if piece is None:
                        writer.close()
                        return
                    if isinstance(piece, float):
                        await asyncio.sleep(piece)
                    else:
                        writer.write(piece)
                        await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.disconnects += 1
        except RuntimeError as exc:  # uvloop: a write on the transport the client just closed
            if "closed" not in str(exc):
                raise
            self.disconnects += 1
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return f"http://127.0.0.1:{self.port}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
