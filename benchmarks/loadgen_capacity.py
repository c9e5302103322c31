"""How many streamed events/s the canary's client follows on one core, and how late it sees them.

Side by side in one run, against the same instant local server (raw asyncio, hand-written
HTTP/1.1 chunked SSE, pinned to CPU 0; clients pinned to CPU 1):
  1. capacity: 100 streams, the server writes one event per write as fast as it can → events/s
     the client takes in (target ≥ 40k events/s);
  2. delivery lag: 100 streams paced at one event per 5 ms each (nominally 20k events/s, the top
     of the SGLang regime in reference load-generators.md §4.4; this Python server reaches ~16-17k);
     lag = receipt − server send stamp (target p99 ≤ 2 ms), and the ITL the client sees against
     the server's pace (a saturated client inflates or collapses it);
for the canary's client as `dsv4ops canary` runs it (rawhttp on uvloop), the same on asyncio's
loop, the earlier aiohttp client and a minimal httpx client doing the same per-event work, and,
where a `.venv-sglang` (or $SGLANG_PYTHON) exists, sglang's own bench client
(`sglang.benchmark.serving`, via benchmarks/sglang_client.py; `bash benchmarks/sglang_env.sh`
builds the environment: ~6 GB, as sglang imports torch). Prints the ratios.

Measured 2026-11-29 on the quiet 2-core CI machine: rawhttp+uvloop 64-72k events/s at capacity,
delivery-lag p99 1.1-1.3 ms paced (asyncio loop 2.4-2.6 ms, aiohttp 2.8-7.2 ms, httpx 168-170 ms);
sglang's client 57k events/s at capacity, ITL p99 12.5 ms paced against the canary's 7.3 ms.

Run: .venv/bin/python benchmarks/loadgen_capacity.py [--window 5] [--streams 100] [--no-sglang]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dsv4ops.canary import eventloop  # noqa: E402
from dsv4ops.canary.loadgen import ChatClient, closed_loop  # noqa: E402
from dsv4ops.canary.selfcheck import read_proc_stat  # noqa: E402
from dsv4ops.canary.sse import SseSplitter  # noqa: E402
from dsv4ops.jsontypes import JSONObject  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_client  # noqa: E402


# ---------------------------------------------------------------- the server (subprocess) ----
def _event(ts: int) -> bytes:
    body = (
        b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"'
        + str(ts).encode()
        + b';"}}]}\n\n'
    )
    return b"%x\r\n%s\r\n" % (len(body), body)


async def _serve_conn(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pace_s: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            if not head.startswith(b"POST /v1/chat/completions "):  # e.g. sglang's GET /server_info
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                continue
            # sglang's bench client sends max_completion_tokens, the canary max_tokens
            n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 100)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for i in range(n):
                if pace_s:
                    await asyncio.sleep(pace_s)
                writer.write(_event(time.monotonic_ns()))
                if i % 16 == 15 or pace_s:
                    await writer.drain()
                else:
                    await asyncio.sleep(0)
            done = b"data: [DONE]\n\n"
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def serve(port: int, pace_s: float) -> None:
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {0})

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_conn(r, w, pace_s), "127.0.0.1", port
        )
        async with server:
            await server.serve_forever()

    asyncio.run(main())


@contextlib.contextmanager
def server(pace_s: float):  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--pace", str(pace_s)])
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- the clients -----------------
def _body(tokens: int) -> JSONObject:
    return {
        "model": "x",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": tokens,
    }


async def run_canary_client(
    url: str, streams: int, window: float, tokens: int, engine: str = "raw"
) -> tuple[list[int], list[float], list[float]]:
    async with ChatClient(url, connections=streams + 8, engine=engine) as client:
        recs = await closed_loop(
            client, lambda i: (f"r{i}", _body(tokens)), concurrency=streams, duration_s=window
        )
    times, lags, itls = [], [], []
    for r in recs:
        sent = [int(x) for x in r.content.split(";") if x]
        times += r.token_times
        lags += [(t - s) / 1e6 for t, s in zip(r.token_times, sent, strict=False)]
        itls += [g * 1e3 for g in r.itls_s]
    return times, lags, itls


async def run_canary_aiohttp(
    url: str, streams: int, window: float, tokens: int
) -> tuple[list[int], list[float], list[float]]:
    return await run_canary_client(url, streams, window, tokens, engine="aiohttp")


async def run_httpx_client(
    url: str, streams: int, window: float, tokens: int
) -> tuple[list[int], list[float], list[float]]:
    import httpx

    times: list[int] = []
    lags: list[float] = []
    itls: list[float] = []
    limits = httpx.Limits(max_connections=streams + 8, max_keepalive_connections=streams + 8)
    deadline = time.perf_counter() + window
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            while time.perf_counter() < deadline:
                splitter, got = SseSplitter(), []
                async with client.stream(
                    "POST", url + "/v1/chat/completions", json=_body(tokens)
                ) as resp:
                    async for chunk in resp.aiter_raw():
                        t = time.perf_counter_ns()
                        got += [(t, ev) for ev in splitter.feed(chunk)]
                prev = 0
                for t, ev in got:  # parse deferred, as in the canary client
                    if ev != b"[DONE]":
                        if prev:
                            itls.append((t - prev) / 1e6)
                        prev = t
                        sent = int(json.loads(ev)["choices"][0]["delta"]["content"].rstrip(";"))
                        times.append(t)
                        lags.append((t - sent) / 1e6)

        await asyncio.gather(*(worker() for _ in range(streams)))
    return times, lags, itls


# (name, coroutine function, event loop). The first is the canary as `dsv4ops canary` runs it.
CLIENTS = (
    ("canary raw+uvloop", run_canary_client, "uvloop"),
    ("canary raw+asyncio", run_canary_client, "asyncio"),
    ("canary aiohttp", run_canary_aiohttp, "asyncio"),  # the client before rawhttp
    ("httpx", run_httpx_client, "asyncio"),
)
CANARY = CLIENTS[0][0]
SGLANG = "sglang bench_serving"


# (event stamps ns, loop lags ms, ITLs ms) of one client run; a run's numbers by name.
Samples = tuple[list[int], list[float], list[float]]
Measured = dict[str, float]


def measure(
    client_fn: Callable[[str, int, float, int], Coroutine[Any, Any, Samples]],
    loop: str,
    url: str,
    streams: int,
    window: float,
    tokens: int,
) -> Measured:
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {1})
    stat0, cpu0, t0 = read_proc_stat(), time.process_time(), time.perf_counter()
    times, lags, itls = eventloop.run(client_fn(url, streams, window, tokens), kind=loop)
    wall = time.perf_counter() - t0
    stat1 = read_proc_stat()
    start = min(times) if times else 0
    steady = [t for t in times if start + 1e9 <= t <= start + window * 1e9]  # skip the first second
    lags.sort()
    itls.sort()
    busy = (stat1[0] - stat0[0]) / max(stat1[1] - stat0[1], 1) if stat0 and stat1 else float("nan")
    return {
        "events_per_s": len(steady) / max(window - 1.0, 1e-9),
        "lag_p50_ms": statistics.median(lags) if lags else float("nan"),
        "lag_p99_ms": lags[int(0.99 * (len(lags) - 1))] if lags else float("nan"),
        "itl_p50_ms": statistics.median(itls) if itls else float("nan"),
        "itl_p99_ms": itls[int(0.99 * (len(itls) - 1))] if itls else float("nan"),
        "client_cpu": (time.process_time() - cpu0) / wall,
        # CPU per event is the number that survives a busy machine (the others include waiting)
        "cpu_us_per_event": (time.process_time() - cpu0) / max(len(times), 1) * 1e6,
        "machine_busy": busy,
    }


CAPACITY = "capacity (instant server)"
LAG = "lag (5 ms pace, 20k ev/s)"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def run_sglang(url: str, streams: int, window: float, tokens: int, python: str) -> Measured | None:
    """sglang's own bench client against the same server (benchmarks/sglang_client.py), or None."""
    import sglang_client

    try:
        r = sglang_client.run(url, streams, window, tokens, python)
    except (RuntimeError, OSError) as exc:
        print(f"  sglang bench client failed: {str(exc).splitlines()[0]}")
        return None
    # sglang reports ITL and TTFT, not delivery lag (it does not know the server's send stamps)
    return {
        "events_per_s": r["events_per_s"] or 0.0,
        "lag_p50_ms": float("nan"),
        "lag_p99_ms": float("nan"),
        "itl_p50_ms": r["median_itl_ms"],
        "itl_p99_ms": r["p99_itl_ms"],
        "client_cpu": r["client_cpu"],
        "cpu_us_per_event": r["cpu_us_per_event"],
        "machine_busy": float("nan"),
    }


def row(mode: str, name: str, r: Measured) -> str:
    return (
        f"{mode:26s} {name:19s} {r['events_per_s']:8.0f} ev/s  lag p50/p99 {r['lag_p50_ms']:6.2f} / "
        f"{r['lag_p99_ms']:7.2f} ms  ITL p50/p99 {r['itl_p50_ms']:6.2f} / {r['itl_p99_ms']:7.2f} ms  "
        f"CPU {r['client_cpu']:.2f} ({r['cpu_us_per_event']:.1f} µs/ev)  machine busy {r['machine_busy']:.0%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=int)
    ap.add_argument("--pace", type=float, default=0.0)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument(
        "--no-sglang", action="store_true", help="skip sglang's bench client even if installed"
    )
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.pace)
        return
    print(
        f"cores: {os.cpu_count()}; server pinned to CPU 0, clients to CPU 1; {args.streams} streams, "
        f"{args.window:.0f} s windows (first second skipped)"
    )
    results: dict[str, dict[str, Measured]] = {}
    sglang_python = None if args.no_sglang else sglang_client.find_sglang_python()
    for mode, pace, tokens in ((CAPACITY, 0.0, 4000), (LAG, 0.005, 400)):
        with server(pace) as url:
            for name, fn, loop in CLIENTS:
                results.setdefault(mode, {})[name] = r = measure(
                    fn, loop, url, args.streams, args.window, tokens
                )
                print(row(mode, name, r))
            if sglang_python:
                theirs = run_sglang(url, args.streams, args.window, tokens, sglang_python)
                if theirs is not None:
                    results[mode][SGLANG] = theirs
                    print(row(mode, SGLANG, theirs))
    cap, lag = results[CAPACITY], results[LAG]
    print(
        "the server paces each stream at 5 ms in the lag run: an ITL far from 5 ms there is the client's distortion"
    )
    for other in [n for n, _, _ in CLIENTS[1:]] + (
        [SGLANG] if SGLANG in cap and SGLANG in lag else []
    ):
        print(
            f"{CANARY} / {other}: events/s at capacity "
            f"{ratio(cap[CANARY]['events_per_s'], cap[other]['events_per_s'])}; "
            f"CPU per event paced {ratio(lag[CANARY]['cpu_us_per_event'], lag[other]['cpu_us_per_event'])}, "
            f"at capacity {ratio(cap[CANARY]['cpu_us_per_event'], cap[other]['cpu_us_per_event'])}; "
            f"lag p99 paced {ratio(lag[CANARY]['lag_p99_ms'], lag[other]['lag_p99_ms'])}; "
            f"ITL p99 paced {lag[CANARY]['itl_p99_ms']:.2f} vs {lag[other]['itl_p99_ms']:.2f} ms"
        )
    ok_cap = cap[CANARY]["events_per_s"] >= 40_000
    ok_lag = lag[CANARY]["lag_p99_ms"] <= 2.0
    print(
        f"target ≥ 40k events/s at {args.streams} streams: {'MET' if ok_cap else 'MISSED'}; "
        f"target lag p99 ≤ 2 ms: {'MET' if ok_lag else 'MISSED'}"
        + (
            ""
            if ok_cap and ok_lag
            else " (check machine busy: another load on the cores skews both)"
        )
    )
    if not sglang_python and not args.no_sglang:
        print(
            "sglang bench client: not run (no .venv-sglang; `bash benchmarks/sglang_env.sh` builds one, "
            "~6 GB with the CUDA torch it imports, or set SGLANG_PYTHON)"
        )


if __name__ == "__main__":
    main()
