"""A tiny component for the supervisor tests: an HTTP server with scriptable bad behaviour.

    python remote_toy_server.py --port P [--port Q] [--delay S] [--ready-file F]
                                [--exit-after S --exit-code N]
                                [--child-ignoring-term PIDFILE] [--listen-file F]
                                [--graceful-term S --term-log F]

Prints "toy: starting" and "toy: argv=<json>" to its log. The ports are bound at once (so no
other process can take them during --delay) but only listened on after --delay: until then a
connection is refused, as with a server that is still starting. Writes the monotonic time at
which it started listening to --listen-file (CLOCK_MONOTONIC is machine-wide, so tests compare
it with the agent's poll times). GET answers 200 with the JSON of the path and of its env keys seen (GET /sleep/S after S
seconds); with
--ready-file it answers 503 until that file exists and logs "toy: first poll" at the first such
answer, so a test can see that a readiness wait is in flight and decide when the server becomes
ready.
With --graceful-term S the toy behaves like an SGLang server process: on SIGTERM it writes
"main TERM <monotonic>" to --term-log, takes S seconds, writes "main exit <monotonic>" and exits 0,
and it has a child (like a scheduler) that writes "child TERM" to the same file if it gets one.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import sys
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    ready_file: str | None = None  # GET answers 503 until this file exists
    polled = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        if _Handler.ready_file and not os.path.exists(_Handler.ready_file):
            if not _Handler.polled.is_set():
                _Handler.polled.set()
                print("toy: first poll", flush=True)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/sleep/"):  # a slow endpoint: answers after that many seconds
            time.sleep(float(self.path.rsplit("/", 1)[1]))
        body = json.dumps({"path": self.path, "env": sorted(os.environ)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _child_ignoring_term(pidfile: str) -> None:
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    with open(pidfile, "w") as f:
        f.write(str(pid))


def _log_line(path: str, text: str) -> None:
    with open(path, "a") as f:
        f.write(f"{text} {time.monotonic()!r}\n")


def _graceful_term(seconds: float, log: str) -> None:
    if os.fork() == 0:  # the "scheduler": records a SIGTERM if anyone sends it one
        signal.signal(signal.SIGTERM, lambda *_: _log_line(log, "child TERM"))
        while True:
            time.sleep(1)

    def on_term(*_: object) -> None:
        _log_line(log, "main TERM")
        time.sleep(seconds)
        _log_line(log, "main exit")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, action="append", default=[])
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--ready-file", default=None)
    ap.add_argument("--exit-after", type=float, default=None)
    ap.add_argument("--exit-code", type=int, default=3)
    ap.add_argument("--child-ignoring-term", default=None)
    ap.add_argument("--listen-file", default=None)
    ap.add_argument("--graceful-term", type=float, default=None)
    ap.add_argument("--term-log", default=None)
    ap.add_argument("rest", nargs="*")
    args, _ = ap.parse_known_args()
    print("toy: starting", flush=True)
    print("toy: argv=" + json.dumps(sys.argv[1:]), flush=True)
    if args.child_ignoring_term:
        _child_ignoring_term(args.child_ignoring_term)
    if args.graceful_term is not None:
        _graceful_term(args.graceful_term, args.term_log)
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        print(f"toy: fatal: exiting with {args.exit_code}", flush=True)
        code: int = args.exit_code
        return code
    servers = [
        http.server.ThreadingHTTPServer(("127.0.0.1", p), _Handler, bind_and_activate=False)
        for p in args.port
    ]
    for s in servers:
        s.server_bind()
    _Handler.ready_file = args.ready_file
    time.sleep(args.delay)
    for s in servers:
        s.server_activate()  # listen()
    if args.listen_file:
        with open(args.listen_file, "w") as f:
            f.write(repr(time.monotonic()))
    print("toy: listening on " + ",".join(map(str, args.port)), flush=True)
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    if servers:
        servers[0].serve_forever()
    else:
        while True:
            time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
