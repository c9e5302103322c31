"""Test helpers and doubles for `dsv4ops.watch` (one module per package area).

- fake_unit: A scripted PD unit for watch's unit tests: Prometheus text for each server and the router
from mutable numbers, /health codes, and probe answers in the twin's stream shapes, served to a
Watcher as its `http_many`. Times come from a FakeClock the test advances.
- runaway: real HTTP servers on 127.0.0.1 whose /metrics is a real SGLang body or 10^6 series
(issue 40), counting what each managed to send before its reader hung up.
- twin: `dsv4ops watch` against a twin stack (testing/twin.py): its endpoints, the real
supervisor's `http_many` through the local executor (requests made by the target agent, as for
a deployed target), forcing hazards, and waiting for a finding with the real clock.
"""

from __future__ import annotations

import contextlib
import json
import re
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from dsv4ops.clock import SystemClock
from dsv4ops.remote import Supervisor, connect
from dsv4ops.remote.results import HttpReply
from dsv4ops.watch import Round, WatchEndpoints, Watcher, WatchSettings
from testing.clock import FakeClock
from testing.twin import TwinStack

# --- fake_unit (was testing/watch.py) ---

ENDPOINTS = WatchEndpoints(
    router_url="http://t:9000",
    router_metrics_url="http://t:29000/metrics",
    metrics={"prefill": "http://t:31000/metrics", "decode": "http://t:31001/metrics"},
    health={"prefill": "http://t:31000/health", "decode": "http://t:31001/health"},
    model="default",
    decode_buckets=(8, 16),
)


@dataclass
class FakeServer:
    engine: str
    running: float = 0.0
    tokens: float = 0.0  # realtime_tokens_total (decode: mode decode; prefill: prefill_compute)
    transfer_failed: float = 0.0
    bootstrap_failed: float | None = None  # None: the child is not born yet
    queues: dict[str, float] = field(default_factory=dict)
    eager: float | None = 0.0  # cuda_graph_passes_total{mode=decode_none}; None: no such family
    graph: float = 0.0
    health: int | None = 200  # None: /health times out
    up: bool = True

    def text(self) -> str:
        lab = f'engine_type="{self.engine}",model_name="m",tp_rank="0"'
        mode = "decode" if self.engine == "decode" else "prefill_compute"
        lines = [
            f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{lab}}} {self.running}",
            f"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{{{lab}}} 0",
            "# TYPE sglang:realtime_tokens counter",
        ]
        if self.tokens:
            lines.append(f'sglang:realtime_tokens_total{{{lab},mode="{mode}"}} {self.tokens}')
        lines += [
            "# TYPE sglang:num_transfer_failed_reqs counter",
            f"sglang:num_transfer_failed_reqs_total{{{lab}}} {self.transfer_failed}",
            "# TYPE sglang:num_bootstrap_failed_reqs counter",
        ]
        if self.bootstrap_failed is not None:
            lines.append(f"sglang:num_bootstrap_failed_reqs_total{{{lab}}} {self.bootstrap_failed}")
        for q in ("prefill_bootstrap", "decode_transfer"):
            v = self.queues.get(q.split("_")[1], 0.0)
            lines.append(
                f"# TYPE sglang:num_{q}_queue_reqs gauge\nsglang:num_{q}_queue_reqs{{{lab}}} {v}"
            )
        if self.eager is not None:
            lines.append("# TYPE sglang:cuda_graph_passes counter")
            lines.append(f'sglang:cuda_graph_passes_total{{{lab},mode="decode_none"}} {self.eager}')
            lines.append(
                f'sglang:cuda_graph_passes_total{{{lab},mode="decode_cuda_graph"}} {self.graph}'
            )
        return "\n".join(lines) + "\n"


@dataclass
class FakeUnit:
    """`unit(requests, timeout_s=...)` answers like Supervisor.http_many. `probe` is how the
    next probes answer: ok | stall | fail | corrupt | markup."""

    prefill: FakeServer = field(default_factory=lambda: FakeServer("prefill"))
    decode: FakeServer = field(default_factory=lambda: FakeServer("decode"))
    router_up: bool = True
    responses_5xx: float = 0.0
    worker_health: dict[str, float] = field(
        default_factory=lambda: {"http://t:31000": 1.0, "http://t:31001": 1.0}
    )
    probe: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def decoding(self, tokens_per_scrape: float = 100.0, running: float = 4.0) -> None:
        """A busy, progressing decode (call once per scrape)."""
        self.decode.running = running
        self.decode.tokens += tokens_per_scrape
        self.decode.graph += tokens_per_scrape / running

    def __call__(
        self, requests: Sequence[Mapping[str, Any]], *, timeout_s: float = 10.0
    ) -> list[HttpReply]:
        self.requests.extend(dict(r) for r in requests)
        return [self._answer(dict(r)) for r in requests]

    def _answer(self, r: dict[str, Any]) -> HttpReply:
        url = r["url"]
        for server, port in ((self.prefill, "31000"), (self.decode, "31001")):
            if f":{port}/" in url:
                if not server.up:
                    return HttpReply(None, "", "connection refused", 0.0)
                if url.endswith("/health") and server.health is None:  # no answer in time
                    return HttpReply(None, "", "timed out", 5.0, timed_out=True)
                if url.endswith("/health"):
                    return HttpReply(server.health, "", None, 0.01)
                return HttpReply(200, server.text(), None, 0.01)
        if url.endswith(":29000/metrics"):
            if not self.router_up:
                return HttpReply(None, "", "connection refused", 0.0)
            return HttpReply(200, self._router_text(), None, 0.01)
        return self._probe_answer(json.loads(r["body"]))

    def _router_text(self) -> str:
        lines = [
            "# TYPE smg_http_responses_total counter",
            f'smg_http_responses_total{{status_code="500",error_code=""}} {self.responses_5xx}',
            "# TYPE smg_worker_health gauge",
        ]
        lines += [f'smg_worker_health{{worker="{w}"}} {v}' for w, v in self.worker_health.items()]
        return "\n".join(lines) + "\n"

    def _probe_answer(self, body: dict[str, Any]) -> HttpReply:
        if self.probe == "stall":
            return HttpReply(None, "", "timed out", 2.0)
        if self.probe == "fail":
            return HttpReply(500, "upstream error", None, 0.1)
        if self.probe == "unauthorized":  # sglang-router 0.3.2's answer to a wrong key
            return HttpReply(401, "Unauthorized", None, 0.01)
        if not body.get("tools"):
            return HttpReply(
                200, sse([{"delta": {"content": "Fine."}, "finish_reason": "stop"}]), None, 0.1
            )
        m = re.search(r"CALL record_step (\{.*?\})\n", body["messages"][-1]["content"])
        assert m, body
        args = json.loads(m.group(1))
        if self.probe == "corrupt":  # cross-talk: another request's session value
            args["session"] = "watch-0123456789ab"
        if self.probe == "markup":
            delta = {"content": '<｜DSML｜tool_calls><｜DSML｜invoke name="record_step">'}
            return HttpReply(200, sse([{"delta": delta, "finish_reason": "stop"}]), None, 0.1)
        call = {
            "index": 0,
            "id": "call_0",
            "type": "function",
            "function": {"name": "record_step", "arguments": json.dumps(args)},
        }
        return HttpReply(
            200, sse([{"delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]), None, 0.1
        )


def sse(choices: list[dict[str, Any]]) -> str:
    events = [f"data: {json.dumps({'choices': [{'index': 0, **c}]})}" for c in choices]
    return "\n\n".join([*events, "data: [DONE]"]) + "\n\n"


# --- twin (was testing/watch.py) ---


def stack_endpoints(stack: TwinStack, buckets: Sequence[int] = ()) -> WatchEndpoints:
    assert stack.router is not None
    workers = {"prefill": stack.prefill.url, "decode": stack.decode.url}
    return WatchEndpoints(
        router_url=stack.router.url,
        router_metrics_url=f"http://127.0.0.1:{stack.router.prometheus_port}/metrics",
        metrics={n: u + "/metrics" for n, u in workers.items()},
        health={n: u + "/health" for n, u in workers.items()},
        model="default",
        decode_buckets=tuple(buckets),
    )


def local_watcher(
    stack: TwinStack, workdir: str, settings: WatchSettings, buckets: Sequence[int] = ()
) -> Watcher:
    supervisor = Supervisor(connect("local"), workdir)
    return Watcher(stack_endpoints(stack, buckets), settings, supervisor.http_many, SystemClock())


def hazard(url: str, name: str, state: str, **extra: object) -> None:
    httpx.post(
        url + "/_twin/hazard", json={"hazard": name, "state": state, **extra}, timeout=5
    ).raise_for_status()


@dataclass
class Watched:
    """Every round a watch ran, and when (wall seconds since it started) each code first showed."""

    rounds: list[Round] = field(default_factory=list)
    first_seen: dict[str, float] = field(default_factory=dict)

    def codes(self) -> set[str]:
        return {f.code for r in self.rounds for f in r.findings}


def watch_for(watcher: Watcher, code: str | None, timeout_s: float) -> Watched:
    """Run the watcher's own loop until `code` shows (or, with None, for `timeout_s` wall
    seconds); give up after `timeout_s`."""
    seen = Watched()
    t0 = time.monotonic()

    def emit(r: Round) -> None:
        seen.rounds.append(r)
        for f in r.findings:
            seen.first_seen.setdefault(f.code, time.monotonic() - t0)

    def stop() -> bool:
        return (code is not None and code in seen.first_seen) or time.monotonic() - t0 >= timeout_s

    watcher.run(emit, stop=stop)
    return seen


# --- hostile: a malicious router / server on 127.0.0.1 (issue 21, F9) ---

HOSTILE_WORKER_URL = (
    "http://10.0.0.9:30001\nworker (as the router lists it): decode http://forged:1 ok"
)
HOSTILE_METRICS = b"\x1b[2J\x1b]0;pwned\x07sglang:num_running_reqs{\x1b[31m} 1\n\x9b31m\r\n"


@contextlib.contextmanager
def hostile_http() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering like a malicious router and servers: /workers
    lists a worker whose URL holds a line break and a forged "worker ... ok" line, /metrics is
    garbage with ESC/OSC/CSI bytes, everything else 200 with an ESC sequence. Yields its URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path == "/workers":
                body = json.dumps(
                    {
                        "workers": [
                            {
                                "url": HOSTILE_WORKER_URL,
                                "is_healthy": False,
                                "worker_type": "decode\x1b[8m",
                            }
                        ]
                    }
                ).encode()
            elif self.path == "/metrics":
                body = HOSTILE_METRICS
            else:
                body = b"ok\x1b[2J"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET  # noqa: N815 - the probes' requests get the same hostile answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass
class ClockedWedge:
    """A unit and its probe stream on a FakeClock: decoding (and the stream receiving tokens)
    until `wedge_at`, then a wedge as 0.5.23 shows it: the stream silent, running > 0, the
    progress counter stopped (or, with `decode_goes_on`, a lost stream beside a decode that
    still decodes other work). `unit` answers like Supervisor.http_many; `silence_s` is the
    probe stream (watch/stream.py's StreamProbe)."""

    clock: FakeClock
    wedge_at: float
    decode_goes_on: bool = False
    unit: FakeUnit = field(default_factory=FakeUnit)
    token_every_s: float = 0.1
    blind_why: str | None = None  # what `blind()` says (a stream that keeps failing)

    def __call__(
        self, requests: Sequence[Mapping[str, Any]], *, timeout_s: float = 10.0
    ) -> list[HttpReply]:
        now = self.clock.monotonic()
        # 0.5.23's counter moves every decode iteration: its value is the tokens made so far
        until = now if self.decode_goes_on else min(now, self.wedge_at)
        self.unit.decode.tokens = round(400.0 * until, 1)  # 400 tok/s
        self.unit.decode.running = 4 if now < self.wedge_at else 12
        return self.unit(requests, timeout_s=timeout_s)

    def silence_s(self) -> float | None:
        now = self.clock.monotonic()
        if now < self.wedge_at:
            return now % self.token_every_s  # a token every 0.1 s
        return now - self.wedge_at

    def blind(self) -> str | None:
        return self.blind_why

    def close(self) -> None:
        pass


@contextlib.contextmanager
def silent_listeners(ports: set[int]) -> Iterator[None]:
    """Listen on each port; accept every connection and never send a byte (closed at exit)."""
    sel = selectors.DefaultSelector()
    listeners, held = [], []
    for port in sorted(ports):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(64)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        listeners.append(s)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            for key, _ in sel.select(timeout=0.1):
                with contextlib.suppress(OSError):
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
        for s in [*listeners, *held]:
            s.close()
        sel.close()


# --- runaway: a /metrics that sends far too much (issue 40) ---

RUNAWAY_SERIES = 10**6  # issue 40's exporter: 10^6 series on one port, ~50 MB
# A real SGLang 0.5.23 decode's /metrics (TP1, PD, on this machine's CPU build): the normal size.
OBSERVED_DECODE_METRICS = (
    Path(__file__).resolve().parents[1] / "tools/sglang-cpu/observed/pd-cpu/decode_metrics_1.txt"
)


Body = Callable[[], Iterable[bytes]]  # a /metrics body, made as it is sent


def runaway_metrics(series: int = RUNAWAY_SERIES) -> Iterator[bytes]:
    """`series` distinct series of one family watch never reads, ~48 bytes each, in blocks of
    1000 lines, made only as far as they are sent."""
    yield b"# HELP runaway:series A label set gone wild.\n# TYPE runaway:series gauge\n"
    for start in range(0, series, 1000):
        stop = min(series, start + 1000)
        yield "".join(
            f'runaway:series{{request_id="r{i:09d}",rank="0"}} 1.0\n' for i in range(start, stop)
        ).encode()


@dataclass
class MetricsUnit:
    """What each port of `metrics_unit` sent: bytes written, and whether the body went out whole
    (False: the reader hung up first)."""

    sent: dict[int, int] = field(default_factory=dict)
    whole: dict[int, bool] = field(default_factory=dict)


def _send(out: Any, port: int, body: Body, seen: MetricsUnit) -> None:
    seen.whole[port] = False
    try:
        for block in body():
            out.write(block)
            seen.sent[port] = seen.sent.get(port, 0) + len(block)
        seen.whole[port] = True
    except OSError:  # the reader stopped reading and closed: what a cap does
        pass


@contextlib.contextmanager
def metrics_unit(bodies: Mapping[int, Body]) -> Iterator[MetricsUnit]:
    """A real HTTP server on 127.0.0.1 on each port of `bodies`: GET /metrics writes that port's
    body (HTTP/1.0, no Content-Length: the reader cannot know its size before reading it),
    /health answers 200, anything else 404."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = MetricsUnit()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            port = int(self.connection.getsockname()[1])
            if self.path not in ("/metrics", "/health"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            if self.path == "/health":
                return
            _send(self.wfile, port, bodies[port], seen)

        def log_message(self, *args: Any) -> None:
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", port), Handler) for port in sorted(bodies)]
    for s in servers:
        s.daemon_threads = False  # server_close() waits for every handler: `seen` is final
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    try:
        yield seen
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
        for t in threads:
            t.join(timeout=10)
