"""The probe stream: one long streamed generation through the router, held open between watch
rounds, so a wedge is seen where the canary sees it, as silence on a stream (issue 23).

The gauges of a wedged decode are last-published and its counter may move only once per log
interval, so judging by them alone takes a wedge window (20 s on the box). A stream that stops
delivering tokens says at once that decoding stopped for it; watch then confirms with two
scrapes 0.5 s apart that the decode has running requests and that its
`realtime_tokens_total{mode="decode"}` did not move (a silent stream beside a decode that still
decodes is a lost request, not a wedge). The stream runs from this machine, with the canary's
client, in a thread of its own; watch reads only `silence_s()`, measured on the stream's clock.

The stream is sized to what the workers serve (canary/limits.py: their context length, read
when it starts), and a stream that cannot run is said, never taken for a quiet box: on the real
server a probe asking more than the 2048-token context was refused once a second and the wedge
detector never ran while `watch --once` said OK (issue 38). `blind()` names why, and watch
reports it as a WARNING (exit 4: undecided), never OK.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from dsv4ops.clock import perf_ns
from dsv4ops.remote.results import HttpReply, HttpRequest
from dsv4ops.timings import TARGET_HTTP_S

if TYPE_CHECKING:
    from dsv4ops.canary.loadgen import ChatClient
    from dsv4ops.canary.records import RequestRecord

# A healthy decode step is ~20-150 ms on the box (the seeds' law at 1-96 running); a stream
# that receives nothing for this long, mid-generation, has stopped decoding.
SILENCE_S = 1.5
CONFIRM_GAP_S = 0.5  # between the two confirming scrapes
# This many generations in a row ended before their first token: the stream is blind (one is a
# restart's blip; three at the 1 s retry pace is a stream that is not coming back by itself).
BLIND_AFTER = 3


class StreamProbe(Protocol):
    def silence_s(self) -> float | None:
        """Seconds since the stream's last token, while a generation is under way; None while
        none is (starting, between two generations, or the probe stopped)."""
        ...

    def blind(self) -> str | None:
        """Why the stream cannot see a wedge (its last BLIND_AFTER generations all failed before
        a token, with the last one's error), else None."""
        ...

    def close(self) -> None: ...


class ProbeStream:
    """The real probe stream (canary.loadgen's ChatClient in a background event loop)."""

    def __init__(
        self,
        router_url: str,
        model: str,
        *,
        max_tokens: int = 100_000,
        worker_urls: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """`max_tokens`: asked of each generation, lowered to the workers' context (read from
        `worker_urls`, base URLs as this machine reaches them) so the server can serve it.
        `headers`: what the router requires besides (its API key)."""
        self.router_url, self.model, self.max_tokens = router_url, model, max_tokens
        self.worker_urls = tuple(worker_urls)
        self._headers = dict(headers or {})
        # generations in a row that ended before a token, and the last one's error
        self._failed_in_row = 0
        self._last_error = ""
        self._stop = threading.Event()
        self._rec: RequestRecord | None = None  # the generation under way
        self._evloop: asyncio.AbstractEventLoop | None = None
        self._client: ChatClient | None = None
        self._ready = threading.Event()  # the client is open (the first round may come at once)
        self._thread = threading.Thread(target=self._main, daemon=True, name="dsv4ops-watch-stream")
        self._thread.start()

    def silence_s(self) -> float | None:
        rec = self._rec  # one read: the stream's thread replaces it between generations
        if rec is None or not rec.t_first or rec.t_end:
            return None
        return (perf_ns() - rec.t_last) / 1e9

    def blind(self) -> str | None:
        n, why = self._failed_in_row, self._last_error  # written by the stream's thread
        if n < BLIND_AFTER:
            return None
        return f"the probe stream's last {n} generations failed before a token: {why}"

    def http_many(
        self, requests: Sequence[HttpRequest], *, timeout_s: float = TARGET_HTTP_S
    ) -> list[HttpReply]:
        """GETs from this machine on the stream's own client (watch's HttpMany): the confirming
        scrapes of a local target, which must not wait on an agent process's start-up."""
        self._ready.wait(10.0)
        loop, client = self._evloop, self._client
        if loop is None or client is None:
            return [HttpReply(None, "", "the probe stream is not running", 0.0) for _ in requests]

        async def one(r: HttpRequest) -> HttpReply:
            from dsv4ops.canary.loadgen import OVERSIZED, TIMED_OUT

            cap = r.get("max_bytes")
            status, text, why = await client.get_text_reply(
                str(r["url"]),
                timeout_s=float(r.get("timeout_s", timeout_s)),
                max_bytes=cap if isinstance(cap, int) else None,
            )
            error = None if status else (why or "no answer")
            return HttpReply(
                status or None,
                text,
                error,
                0.0,
                timed_out=why == TIMED_OUT,
                oversized=why == OVERSIZED,
            )

        async def every() -> list[HttpReply]:
            return list(await asyncio.gather(*(one(r) for r in requests)))

        return asyncio.run_coroutine_threadsafe(every(), loop).result(timeout_s + 5.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _main(self) -> None:
        try:
            asyncio.run(self._loop())
        finally:  # ended (closed, or the client could not start): the scrapes get no answer
            self._evloop, self._client = None, None
            self._ready.set()

    async def _loop(self) -> None:
        from dsv4ops.canary.loadgen import ChatClient
        from dsv4ops.canary.reach import read_limits

        body = {
            "model": self.model,
            "stream": True,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            "messages": [
                {
                    "role": "user",
                    "content": "Watch probe stream: write a long, "
                    "numbered list of short sentences.",
                }
            ],
        }
        n = 0
        async with ChatClient(
            self.router_url,
            connections=8,
            total_timeout_s=24 * 3600.0,
            engine="aiohttp",
            headers=self._headers,
        ) as client:
            self._evloop, self._client = asyncio.get_running_loop(), client
            self._ready.set()
            client.limits = await read_limits(client, self.worker_urls)
            while not self._stop.is_set():
                n += 1
                sink: list[RequestRecord] = []
                task = asyncio.create_task(
                    client.stream(body, rid=f"watch-stream-{n}", tag="watch", sink=sink)
                )
                while not task.done() and not self._stop.is_set():
                    self._rec = sink[0] if sink else None
                    await asyncio.sleep(0.1)
                self._rec = None
                if not task.done():
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                    return
                rec = task.result()
                self._count(rec)
                if not rec.t_first:  # failed before a token: a redeploy may have changed
                    # the limits (another context length); the last known ones stay if none say
                    fresh = await read_limits(client, self.worker_urls)
                    if fresh.context_length is not None:
                        client.limits = fresh
                await asyncio.sleep(1.0)  # a failed or finished generation: the next one

    def _count(self, rec: RequestRecord) -> None:
        """One generation ended: a token seen clears the count; an error before any adds one."""
        if rec.t_first:
            self._failed_in_row, self._last_error = 0, ""
        elif rec.error is not None:
            detail = f"{rec.error}: {rec.error_detail}" if rec.error_detail else rec.error
            self._last_error = " ".join(detail.split())[:300]
            self._failed_in_row += 1
