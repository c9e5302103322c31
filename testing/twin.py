"""Test helpers and doubles for `dsv4ops.twin` (one module per package area).

- client: Client-side helpers for twin tests: SSE parsing, chat-stream assembly, fake bootstrap.
- fake_clock: A settable clock for the twin's time-dependent settings (step drift): returns `t`, moved by hand.
- load: Measure a twin decode's step time from the outside (for the fidelity test and the benchmark).

`measure_step_ms` keeps `concurrency - 1` background requests running on a decode, adds one
streaming probe and times its tokens on the client; the step is the least-squares slope of
arrival time over token index, converted to model milliseconds with the twin's time scale. Requests use SGLang's fake bootstrap host, so a
lone decode needs no prefill.
- stack: Start a twin PD stack (prefill + decode, optionally the real router of either kind:
  sglang-router 0.3.2, or SMG from its own venv) for tests.

Usage::

    from testing.twin import twin_stack

    with twin_stack(router=True, decode_args=["--cuda-graph-bs-decode", "32", "40"],
                    env={"DSV4_TWIN_TIME_SCALE": "0.1"}) as stack:
        stack.router.url          # http://127.0.0.1:PORT  (None without router=True)
        stack.prefill.url, stack.prefill.bootstrap_port, stack.prefill.pid
        stack.decode.url, stack.decode.pid
        stack.event_log           # Path of the shared JSONL event log
        stack.events()            # parsed events so far
        stack.restart("decode")   # SIGTERM + start again with the same args/env/ports
        stack.kill("decode")      # SIGKILL (the port closes; the router marks it unhealthy)

Everything binds free ports on 127.0.0.1 and is killed (process group, SIGTERM then SIGKILL) on
exit. `fast=True` (default) shortens the modelled start-up (model load, graph capture, warmup) and
the SIGTERM path (watchdog tick, scheduler exit) so a stack is ready in about a second and stops
in a fraction of one; anything in `env` overrides it. The router runs with
HF_HUB_OFFLINE=1 so its tokenizer lookup fails at once instead of trying the network.

Signature (stable; other helpers rely on it)::

    twin_stack(*, prefill_args=(), decode_args=(), env=None, prefill_env=None, decode_env=None,
               router=False, router_args=(), model_path=DEFAULT_MODEL_PATH, workdir=None,
               fast=True, ready_timeout=60.0) -> ContextManager[TwinStack]
- traffic: Light background traffic through the router: a few client threads streaming short chats
until stopped (bounded in count), for tests and benchmarks that watch a twin under load.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from dsv4ops.jsontypes import JSONObject
from dsv4ops.routerkind import RouterKind
from testing.ports import free_ports

# --- client (was testing/twin.py) ---

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "nonce": {"type": "string"},
                "pad": {"type": "string"},
            },
            "required": ["city", "nonce"],
        },
    },
}


def sse_events(lines: Iterable[str]) -> list[Any]:
    """Parse `data:` lines of an SSE stream; '[DONE]' is kept as the string."""
    out: list[Any] = []
    for line in lines:
        if line.startswith("data:"):
            payload = line[5:].strip()
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def assemble_chat_stream(events: list[Any]) -> dict[str, Any]:
    """Rebuild content, the tool call and the finish reason from chat.completion.chunk events."""
    content, name, call_id, args, finish = "", None, None, "", None
    for ev in events:
        if ev == "[DONE]" or not ev.get("choices"):
            continue
        choice = ev["choices"][0]
        delta = choice.get("delta") or {}
        content += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") or {}
            if fn.get("name"):
                name, call_id = fn["name"], call.get("id")
            args += fn.get("arguments") or ""
        finish = choice.get("finish_reason") or finish
    return {"content": content, "name": name, "id": call_id, "arguments": args, "finish": finish}


def stream_chat(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    with client.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        events = sse_events(r.iter_lines())
    assert events[-1] == "[DONE]"
    return assemble_chat_stream(events)


def fake_bootstrap() -> dict[str, Any]:
    return {"bootstrap_host": "2.2.2.2", "bootstrap_port": 0, "bootstrap_room": 0}


# --- fake_clock (was testing/twin.py) ---


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# --- load (was testing/twin.py) ---

FAKE_BOOTSTRAP = {"bootstrap_host": "2.2.2.2", "bootstrap_port": 0, "bootstrap_room": 0}


async def _state(session: aiohttp.ClientSession, url: str) -> JSONObject:
    async with session.get(f"{url}/_twin/state") as resp:
        state: JSONObject = await resp.json()
        return state


async def wait_running(
    session: aiohttp.ClientSession, url: str, n: int, timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await _state(session, url))["running"] == n:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"decode at {url} never reached {n} running requests")


async def _background(session: aiohttp.ClientSession, url: str, i: int, stream: bool) -> int:
    body = {
        "text": f"background request {i}",
        "stream": stream,
        "sampling_params": {"max_new_tokens": 1_000_000},
        **FAKE_BOOTSTRAP,
    }
    chunks = 0
    async with session.post(f"{url}/generate", json=body) as resp:
        if stream:
            async for line in resp.content:
                chunks += line.startswith(b"data:")
        else:
            await resp.read()
    return chunks


async def _probe(session: aiohttp.ClientSession, url: str, tokens: int) -> list[float]:
    body = {
        "text": "probe request",
        "stream": True,
        "sampling_params": {"max_new_tokens": tokens},
        **FAKE_BOOTSTRAP,
    }
    arrivals: list[float] = []
    async with session.post(f"{url}/generate", json=body) as resp:
        async for line in resp.content:
            if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
                arrivals.append(time.perf_counter())
    return arrivals


async def measure_step_ms(
    url: str,
    concurrency: int,
    *,
    probe_tokens: int,
    time_scale: float,
    stream_background: bool = False,
) -> float:
    """Mean modelled step (ms) at `concurrency` running requests; aborts the load afterwards."""
    timeout = aiohttp.ClientTimeout(total=300)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        tasks = [
            asyncio.create_task(_background(session, url, i, stream_background))
            for i in range(concurrency - 1)
        ]
        try:
            await wait_running(session, url, concurrency - 1)
            arrivals = await _probe(session, url, probe_tokens)
        finally:
            async with session.post(f"{url}/abort_request", json={"abort_all": True}):
                pass
            await asyncio.gather(*tasks, return_exceptions=True)
            await wait_running(session, url, 0)
    if len(arrivals) < probe_tokens:
        raise RuntimeError(f"probe got {len(arrivals)} of {probe_tokens} tokens")
    return step_from_arrivals(arrivals[:probe_tokens]) / time_scale * 1000.0


def step_from_arrivals(arrivals: list[float]) -> float:
    """Least-squares slope of arrival time over token index: every arrival contributes, so a
    late first or last token (client jitter) barely moves it."""
    n = len(arrivals)
    mean_i = (n - 1) / 2
    mean_t = sum(arrivals) / n
    num = sum((i - mean_i) * (t - mean_t) for i, t in enumerate(arrivals))
    den = sum((i - mean_i) ** 2 for i in range(n))
    return num / den


# --- stack (was testing/twin.py) ---

DEFAULT_MODEL_PATH = "/models/DeepSeek-V4-Flash"
FAST_ENV = {
    "DSV4_TWIN_MODEL_LOAD_S": "0.2",
    "DSV4_TWIN_CAPTURE_S_PER_BUCKET": "0.005",
    "DSV4_TWIN_WARMUP_S": "0.2",
    # and the SIGTERM path (SGLang: up to 5 s to notice, then the schedulers' exit), so a
    # teardown at time scale 1 does not wait out the stop grace
    "DSV4_TWIN_SIGTERM_TICK_S": "0.2",
    "DSV4_TWIN_SCHEDULER_EXIT_S": "0.2",
}


def _inherited_env() -> dict[str, str]:
    """The caller's environment minus twin tunables, so a stray DSV4_TWIN_FORCE cannot leak in."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DSV4_TWIN_", "SGLANG_OPT_", "SGLANG_MOE_CONFIG_DIR"))
    }


def _die_with_parent() -> None:
    """In the child: SIGKILL it if the test process dies (no orphans even on a hard kill)."""
    with suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Proc:
    """One started process: its argv/env (for restarts), ports, log file and Popen handle."""

    name: str
    argv: list[str]
    env: dict[str, str]
    port: int
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    bootstrap_port: int | None = None
    prometheus_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def metrics_url(self) -> str:
        port = self.prometheus_port or self.port
        return f"http://127.0.0.1:{port}/metrics"

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, grace: float = 5.0) -> None:
        self.send(sig)
        self.reap(grace)

    def send(self, sig: int) -> None:
        """Signal the process group (nothing if it has already exited)."""
        if self.popen is not None and self.popen.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def reap(self, grace: float = 5.0) -> None:
        """Wait up to `grace` s for the exit, then SIGKILL the group and wait for it."""
        if self.popen is None:
            return
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def wedged(self) -> bool:
        """A twin whose scheduler is wedged, by its own /_twin/state (False if it cannot say)."""
        try:
            with urllib.request.urlopen(self.url + "/_twin/state", timeout=1.0) as resp:
                return bool(json.loads(resp.read()).get("wedged"))
        except (OSError, ValueError):
            return False

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""


@dataclass
class TwinStack:
    prefill: Proc
    decode: Proc
    router: Proc | None
    event_log: Path
    workdir: Path
    ready_timeout: float = 60.0
    procs: dict[str, Proc] = field(default_factory=dict)

    @property
    def router_url(self) -> str:
        """The router's URL, for a stack started with router=True (the type says it may have none)."""
        assert self.router is not None, "this twin stack was started without a router"
        return self.router.url

    def events(self) -> list[dict[str, Any]]:
        if not self.event_log.exists():
            return []
        return [json.loads(x) for x in self.event_log.read_text().splitlines() if x.strip()]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to one component's process group and reap it."""
        self.procs[name].stop(sig, grace=5.0)

    def start(self, name: str, wait: bool = True) -> None:
        """Start a stopped component again with its original argv/env/ports."""
        proc = self.procs[name]
        proc.start()
        if wait:
            wait_http(
                proc.url + ("/readiness" if name == "router" else "/health"),
                self.ready_timeout,
                proc,
            )

    def restart(self, name: str, wait: bool = True) -> None:
        """SIGTERM one component and start it again (same ports, args and env)."""
        self.procs[name].stop(signal.SIGTERM)
        self.start(name, wait=wait)

    def wait_router_ready(self, timeout: float | None = None) -> None:
        if self.router is not None:
            wait_http(self.router.url + "/readiness", timeout or self.ready_timeout, self.router)


def end_all(procs: Sequence[Proc]) -> None:
    """The test is over: end every component at once rather than one after another (each twin
    takes SGLang's SIGTERM path, a few tenths of a second at FAST_ENV; the router's is similar).
    A wedged twin gets SIGKILL: SGLang's SIGTERM path would wait out its 15 s scheduler-exit
    timeout (tokenizer_manager.py:456, model time) for a scheduler that never answers, which no
    test reads after its body. Tests that assert a stop (kill/restart) call Proc.stop themselves."""
    wedged = {p.name for p in procs if p.name != "router" and p.alive() and p.wedged()}
    for proc in procs:
        proc.send(signal.SIGKILL if proc.name in wedged else signal.SIGTERM)
    for proc in procs:
        proc.reap()


def http_status(url: str, timeout: float = 5.0) -> int:
    """GET url → status code, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0


def wait_http(url: str, timeout: float, proc: Proc | None = None) -> None:
    """Poll until url answers 200; raises RuntimeError (with the log tail) on timeout/death."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http_status(url, timeout=5.0) == 200:
            return
        if proc is not None and not proc.alive():
            raise RuntimeError(
                f"{proc.name} exited ({proc.popen.returncode if proc.popen else '?'})"
                f" before {url} was ready:\n{proc.log_tail()}"
            )
        time.sleep(0.02)  # a 0.1 s period cost ~50 ms per wait on average, three waits a stack
    tail = proc.log_tail() if proc else ""
    raise RuntimeError(f"{url} not ready after {timeout}s:\n{tail}")


@contextmanager
def twin_stack(
    *,
    prefill_args: Sequence[str] = (),
    decode_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    prefill_env: Mapping[str, str] | None = None,
    decode_env: Mapping[str, str] | None = None,
    router: bool = False,
    router_args: Sequence[str] = (),
    router_kind: RouterKind = RouterKind.SGLANG_ROUTER,
    model_path: str = DEFAULT_MODEL_PATH,
    workdir: Path | None = None,
    fast: bool = True,
    ready_timeout: float = 60.0,
) -> Iterator[TwinStack]:
    """Start twin prefill + decode (+ router) on free ports; yield a TwinStack; kill all on exit."""
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="twin-stack-")
        workdir = Path(tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    event_log = workdir / "events.jsonl"
    p_port, boot_port, d_port, r_port, prom_port = free_ports(5)
    base_env = {
        **_inherited_env(),
        **(FAST_ENV if fast else {}),
        **(env or {}),
        "DSV4_TWIN_EVENT_LOG": str(event_log),
    }
    py = sys.executable
    common = [
        "--model-path",
        model_path,
        "--host",
        "127.0.0.1",
        "--tp-size",
        "4",
        "--disaggregation-transfer-backend",
        "nixl",
        "--disaggregation-bootstrap-port",
        str(boot_port),
    ]
    prefill = Proc(
        "prefill",
        [
            py,
            "-m",
            "dsv4ops.twin.launch_server",
            *common,
            "--port",
            str(p_port),
            "--disaggregation-mode",
            "prefill",
            *prefill_args,
        ],
        {**base_env, **(prefill_env or {})},
        p_port,
        workdir / "prefill.log",
        bootstrap_port=boot_port,
    )
    decode = Proc(
        "decode",
        [
            py,
            "-m",
            "dsv4ops.twin.launch_server",
            *common,
            "--port",
            str(d_port),
            "--disaggregation-mode",
            "decode",
            *decode_args,
        ],
        {**base_env, **(decode_env or {})},
        d_port,
        workdir / "decode.log",
    )
    router_proc = None
    if router:
        router_env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        router_proc = Proc(
            "router",
            [
                _router_python(router_kind),
                "-m",
                router_kind.module,
                "--pd-disaggregation",
                "--prefill",
                prefill.url,
                str(boot_port),
                "--decode",
                decode.url,
                "--host",
                "127.0.0.1",
                "--port",
                str(r_port),
                "--prometheus-host",
                "127.0.0.1",
                "--prometheus-port",
                str(prom_port),
                "--health-check-interval-secs",
                "1",
                *router_args,
            ],
            router_env,
            r_port,
            workdir / "router.log",
            prometheus_port=prom_port,
        )
    stack = TwinStack(prefill, decode, router_proc, event_log, workdir, ready_timeout)
    stack.procs = {"prefill": prefill, "decode": decode}
    if router_proc is not None:
        stack.procs["router"] = router_proc
    try:
        prefill.start()
        decode.start()
        wait_http(prefill.url + "/health", ready_timeout, prefill)
        wait_http(decode.url + "/health", ready_timeout, decode)
        if router_proc is not None:
            router_proc.start()
            wait_http(router_proc.url + "/readiness", ready_timeout, router_proc)
        yield stack
    finally:
        end_all(list(reversed(stack.procs.values())))
        if tmp is not None:
            tmp.cleanup()


def _router_python(kind: RouterKind) -> str:
    """SMG runs from its own venv (dsv4ops/profiles/routers.py); sglang-router from ours."""
    if kind is RouterKind.SMG:
        from dsv4ops.profiles.routers import smg_python

        return str(smg_python())
    return sys.executable


@contextmanager
def twin_server(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    model_path: str = DEFAULT_MODEL_PATH,
    workdir: Path | None = None,
    fast: bool = True,
    ready_timeout: float = 60.0,
    wait: bool = True,
    launcher_prefix: Sequence[str] = (),
) -> Iterator[Proc]:
    """One twin process (e.g. a lone decode for load tests) on a free port; killed on exit.

    `args` are launch_server arguments besides --model-path/--host/--port. Decode requests that
    carry `bootstrap_host: "2.2.2.2"` (SGLang's fake bootstrap) need no prefill.
    `launcher_prefix` goes before the interpreter (e.g. ["taskset", "-c", "0"]).
    """
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="twin-server-")
        workdir = Path(tmp.name)
    (port,) = free_ports(1)
    full_env = {**_inherited_env(), **(FAST_ENV if fast else {}), **(env or {})}
    full_env.setdefault("DSV4_TWIN_EVENT_LOG", str(workdir / "events.jsonl"))
    proc = Proc(
        "twin",
        [
            *launcher_prefix,
            sys.executable,
            "-m",
            "dsv4ops.twin.launch_server",
            "--model-path",
            model_path,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *args,
        ],
        full_env,
        port,
        workdir / "twin.log",
    )
    try:
        proc.start()
        if wait:
            wait_http(proc.url + "/health", ready_timeout, proc)
        yield proc
    finally:
        end_all([proc])
        if tmp is not None:
            tmp.cleanup()


# --- traffic (was testing/twin.py) ---


class RouterTraffic:
    def __init__(
        self,
        url: str,
        threads: int = 4,
        max_requests: int = 4000,
        max_tokens: int = 48,
        read_timeout_s: float = 5.0,  # a stream silent this long is cut (a held one: longer)
        model: str = "default",  # SMG routes by model id: name the served one (DEFAULT_MODEL_PATH)
    ) -> None:
        self.url, self.left, self.stop = url, max_requests, threading.Event()
        self.model = model
        self.max_tokens = max_tokens
        self.read_timeout_s = read_timeout_s
        self.completed = 0
        self.errors = 0
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": self.max_tokens,
            "stream": True,
        }
        with httpx.Client(timeout=httpx.Timeout(self.read_timeout_s, connect=2.0)) as client:
            while not self.stop.is_set() and self.left > 0:
                self.left -= 1
                try:
                    with client.stream("POST", self.url + "/v1/chat/completions", json=body) as r:
                        for _ in r.iter_lines():
                            if self.stop.is_set():
                                break
                    self.completed += 1
                except httpx.HTTPError:
                    self.errors += 1
                    time.sleep(0.05)

    def __enter__(self) -> RouterTraffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)
