"""How many streamed events/s the canary's client follows on one core, and how late it sees them.

Side by side in one run, against the same instant local server (raw asyncio, hand-written
HTTP/1.1 chunked SSE, pinned to CPU 0; clients pinned to CPU 1):
  1. capacity: 100 streams, the server writes one event per write as fast as it can → events/s
     the client takes in (target ≥ 40k events/s);
  2. delivery lag: 100 streams paced at one event per 5 ms each (20k events/s, the top of the
     SGLang regime in reference load-generators.md §4.4); lag = receipt − server send stamp
     (target p99 ≤ 2 ms);
for the canary's aiohttp client (`dsv4ops.canary.loadgen.ChatClient`) and a minimal httpx client
doing the same per-event work; prints the ratio. sglang's own bench client
(`sglang.benchmark.serving`) needs torch/CUDA and is not installable here: the script says so and
runs it only where `import sglang.benchmark.serving` works.

Run: .venv/bin/python benchmarks/loadgen_capacity.py [--window 5] [--streams 100]
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dsv4ops.canary.loadgen import ChatClient, closed_loop  # noqa: E402
from dsv4ops.canary.selfcheck import read_proc_stat  # noqa: E402
from dsv4ops.canary.sse import SseSplitter  # noqa: E402


# ---------------------------------------------------------------- the server (subprocess) ----
def _event(ts: int) -> bytes:
    body = b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"' + \
        str(ts).encode() + b';"}}]}\n\n'
    return b"%x\r\n%s\r\n" % (len(body), body)


async def _serve_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pace_s: float) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            n = int(body.get("max_tokens") or 100)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
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
        server = await asyncio.start_server(lambda r, w: _serve_conn(r, w, pace_s), "127.0.0.1", port)
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
def _body(tokens: int) -> dict:
    return {"model": "x", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": tokens}


async def run_canary_client(url: str, streams: int, window: float, tokens: int) -> tuple[list[int], list[float]]:
    async with ChatClient(url, connections=streams + 8) as client:
        recs = await closed_loop(client, lambda i: (f"r{i}", _body(tokens)), concurrency=streams,
                                 duration_s=window)
    times, lags = [], []
    for r in recs:
        sent = [int(x) for x in r.content.split(";") if x]
        times += r.token_times
        lags += [(t - s) / 1e6 for t, s in zip(r.token_times, sent, strict=False)]
    return times, lags


async def run_httpx_client(url: str, streams: int, window: float, tokens: int) -> tuple[list[int], list[float]]:
    import httpx

    times: list[int] = []
    lags: list[float] = []
    limits = httpx.Limits(max_connections=streams + 8, max_keepalive_connections=streams + 8)
    deadline = time.perf_counter() + window
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        async def worker() -> None:
            while time.perf_counter() < deadline:
                splitter, got = SseSplitter(), []
                async with client.stream("POST", url + "/v1/chat/completions", json=_body(tokens)) as resp:
                    async for chunk in resp.aiter_raw():
                        t = time.perf_counter_ns()
                        got += [(t, ev) for ev in splitter.feed(chunk)]
                for t, ev in got:  # parse deferred, as in the canary client
                    if ev != b"[DONE]":
                        sent = int(json.loads(ev)["choices"][0]["delta"]["content"].rstrip(";"))
                        times.append(t)
                        lags.append((t - sent) / 1e6)

        await asyncio.gather(*(worker() for _ in range(streams)))
    return times, lags


def measure(client_fn, url: str, streams: int, window: float, tokens: int) -> dict:  # type: ignore[no-untyped-def]
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {1})
    stat0, cpu0, t0 = read_proc_stat(), time.process_time(), time.perf_counter()
    times, lags = asyncio.run(client_fn(url, streams, window, tokens))
    wall = time.perf_counter() - t0
    stat1 = read_proc_stat()
    start = min(times) if times else 0
    steady = [t for t in times if start + 1e9 <= t <= start + window * 1e9]  # skip the first second
    lags.sort()
    busy = (stat1[0] - stat0[0]) / max(stat1[1] - stat0[1], 1) if stat0 and stat1 else float("nan")
    return {
        "events_per_s": len(steady) / max(window - 1.0, 1e-9),
        "lag_p50_ms": statistics.median(lags) if lags else float("nan"),
        "lag_p99_ms": lags[int(0.99 * (len(lags) - 1))] if lags else float("nan"),
        "client_cpu": (time.process_time() - cpu0) / wall,
        # CPU per event is the number that survives a busy machine (the others include waiting)
        "cpu_us_per_event": (time.process_time() - cpu0) / max(len(times), 1) * 1e6,
        "machine_busy": busy,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=int)
    ap.add_argument("--pace", type=float, default=0.0)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--streams", type=int, default=100)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.pace)
        return
    print(f"cores: {os.cpu_count()}; server pinned to CPU 0, clients to CPU 1; {args.streams} streams, "
          f"{args.window:.0f} s windows (first second skipped)")
    results: dict[str, dict[str, dict]] = {}
    for mode, pace, tokens in (("capacity (instant server)", 0.0, 4000), ("lag (5 ms pace, 20k ev/s)", 0.005, 400)):
        with server(pace) as url:
            for name, fn in (("canary aiohttp", run_canary_client), ("httpx", run_httpx_client)):
                results.setdefault(mode, {})[name] = r = measure(fn, url, args.streams, args.window, tokens)
                print(f"{mode:28s} {name:15s} {r['events_per_s']:9.0f} ev/s  lag p50 {r['lag_p50_ms']:7.2f} ms  "
                      f"p99 {r['lag_p99_ms']:8.2f} ms  client CPU {r['client_cpu']:.2f} ({r['cpu_us_per_event']:.1f} µs/ev)  machine busy {r['machine_busy']:.0%}")
    cap = results["capacity (instant server)"]
    lag = results["lag (5 ms pace, 20k ev/s)"]
    print(f"ratio canary/httpx events/s (capacity): {cap['canary aiohttp']['events_per_s'] / max(cap['httpx']['events_per_s'], 1):.2f}x")
    print(f"ratio httpx/canary CPU per event: {cap['httpx']['cpu_us_per_event'] / max(cap['canary aiohttp']['cpu_us_per_event'], 1e-9):.2f}x; "
          f"one core at the canary's cost: {1e6 / max(cap['canary aiohttp']['cpu_us_per_event'], 1e-9):.0f} events/s")
    print(f"ratio httpx/canary lag p99 (paced): {lag['httpx']['lag_p99_ms'] / max(lag['canary aiohttp']['lag_p99_ms'], 1e-9):.2f}x")
    ok_cap = cap["canary aiohttp"]["events_per_s"] >= 40_000
    ok_lag = lag["canary aiohttp"]["lag_p99_ms"] <= 2.0
    print(f"target ≥ 40k events/s at {args.streams} streams: {'MET' if ok_cap else 'MISSED'}; "
          f"target lag p99 ≤ 2 ms: {'MET' if ok_lag else 'MISSED'}"
          + ("" if ok_cap and ok_lag else " (check machine busy: another load on the cores skews both)"))
    try:
        import sglang.benchmark.serving  # noqa: F401
    except ImportError:
        print("sglang bench client: not installable here (sglang needs torch/CUDA); not run")
    else:
        print("sglang bench client: importable, but not driven by this script yet")


if __name__ == "__main__":
    main()
