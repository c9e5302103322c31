"""A wedge is a finding within 3 s of the probe stream's last token (issue 23, item 8): the
stream's silence decides, two scrapes 0.5 s apart confirm (running > 0, the decode's counter
unmoved); deterministic, on a fake clock, at every phase of the 5 s round."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from dsv4ops import exitcodes
from dsv4ops.watch import Round, Severity, Watcher, WatchSettings
from dsv4ops.watch.loop import POLL_S
from dsv4ops.watch.stream import BLIND_AFTER, CONFIRM_GAP_S, SILENCE_S, ProbeStream
from testing.clock import FakeClock
from testing.twin import twin_server
from testing.watch import ENDPOINTS, ClockedWedge


def _first_wedge(
    scripted: ClockedWedge, clock: FakeClock, until_s: float
) -> tuple[float | None, Round | None]:
    w = Watcher(ENDPOINTS, WatchSettings(), scripted, clock, probe=False, stream=scripted)
    found: list[tuple[float, Round]] = []

    def emit(r: Round) -> None:
        if not found and any(f.code == "decode_wedged" for f in r.findings):
            found.append((clock.monotonic(), r))

    end = clock.monotonic() + until_s
    w.run(emit, stop=lambda: bool(found) or clock.monotonic() > end)
    return (found[0][0], found[0][1]) if found else (None, None)


@pytest.mark.parametrize("phase_s", [0.0, 0.3, 1.7, 2.5, 3.9, 4.95])
def test_a_wedge_is_found_within_3_s_of_the_last_token(phase_s: float) -> None:
    clock = FakeClock()
    wedge_at = clock.monotonic() + 20.0 + phase_s  # four healthy rounds, then a random phase
    at, r = _first_wedge(ClockedWedge(clock, wedge_at), clock, until_s=60.0)
    assert at is not None and r is not None, "no finding"
    latency = at - wedge_at
    assert SILENCE_S <= latency <= SILENCE_S + POLL_S + CONFIRM_GAP_S + 0.05 < 3.0, latency
    f = next(f for f in r.findings if f.code == "decode_wedged")
    assert f.evidence[0].startswith("probe stream: no token for")
    assert "stuck at" in f.evidence[1] and "num_running_reqs 12" in f.evidence[2]


def test_a_silent_stream_beside_a_decoding_decode_is_no_wedge() -> None:
    clock = FakeClock()
    scripted = ClockedWedge(clock, clock.monotonic() + 10.0, decode_goes_on=True)
    at, _ = _first_wedge(scripted, clock, until_s=60.0)
    assert at is None  # the counter moves: decoding goes on for others (the gauge path agrees)


def test_a_blind_stream_beside_a_healthy_unit_is_a_warning_never_ok() -> None:
    # issue 38: the stream refused 26 times in 30 s while `watch --once` said OK
    clock = FakeClock()
    why = "the probe stream's last 3 generations failed before a token: http_status: too long"
    scripted = ClockedWedge(clock, clock.monotonic() + 1e9, blind_why=why)
    w = Watcher(ENDPOINTS, WatchSettings(), scripted, clock, probe=False, stream=scripted)
    last = w.once(lambda r: None)
    assert [f.code for f in last.findings] == ["probe_stream_blind"]
    assert last.worst is Severity.WARNING
    assert exitcodes.for_severity(last.worst.name) == exitcodes.UNDECIDED
    assert last.findings[0].evidence[0] == why


def _wait(cond: Callable[[], bool], timeout_s: float = 20.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.fixture(scope="module")
def short_context_url() -> Iterator[str]:
    with twin_server(["--context-length", "2048"], env={"DSV4_TWIN_TIME_SCALE": "0.05"}) as proc:
        yield proc.url


def test_the_stream_sized_by_the_workers_limits_runs_on_a_short_context(
    short_context_url: str,
) -> None:
    stream = ProbeStream(short_context_url, "m", worker_urls=[short_context_url])
    try:
        assert _wait(lambda: stream.silence_s() is not None), "no generation under way"
        assert stream.blind() is None
    finally:
        stream.close()


def test_the_stream_that_asks_too_much_says_it_is_blind(short_context_url: str) -> None:
    stream = ProbeStream(short_context_url, "m")  # no worker to read the limit from
    try:
        assert _wait(lambda: stream.blind() is not None), "never said blind"
        why = stream.blind()
        assert why is not None and f"last {BLIND_AFTER} generations" in why
        assert "max_completion_tokens is too large: 100000" in why
        assert stream.silence_s() is None  # never a token: nothing for the wedge check to time
    finally:
        stream.close()


@contextlib.contextmanager
def _limits_that_change(first: int, then: int) -> Iterator[tuple[str, list[int]]]:
    """A worker whose /v1/models says max_model_len `first` once, `then` after (a redeploy with
    another context length, seen by a stream already running); the lengths it served."""
    served: list[int] = []

    class Card(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            n = first if not served else then
            if self.path == "/v1/models":
                served.append(n)
            body = json.dumps({"data": [{"id": "m", "max_model_len": n}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Card)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def test_a_stream_refused_before_a_token_reads_the_limits_again(short_context_url: str) -> None:
    """The limits read at start said 1M (the unit before a redeploy); the server now serves
    2048 and refuses the stream: the next generation is sized by the limits read again."""
    with _limits_that_change(1_000_000, 2048) as (worker, served):
        stream = ProbeStream(short_context_url, "m", worker_urls=[worker])
        try:
            assert _wait(lambda: stream.silence_s() is not None), f"never sized anew: {served}"
            assert served[0] == 1_000_000 and 2048 in served[1:]
            assert stream.blind() is None
        finally:
            stream.close()
