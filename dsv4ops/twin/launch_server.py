"""`python -m dsv4ops.twin.launch_server ARGS`: the twin in place of `python -m sglang.launch_server`.

Start-up follows SGLang's order: parse (argparse errors exit 2, unknown flags included), resolve
(refusals exit 1), start the prefill's bootstrap server, load the model and capture CUDA graphs
(HTTP port still closed), open the HTTP port with /health 503 while the server warms up, then
serve. Once up, SIGTERM takes SGLang's graceful path (`shutdown.py`); SIGINT, and any signal
during start-up, stop at once; SIGKILL just closes the ports.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from aiohttp import web

from .args import StartupError, parse_args
from .config import TwinConfigError, load_config
from .http_app import build_app
from .kernel_package import load_plugins, resolve_kernel_config
from .server import TwinServer
from .shutdown import on_sigterm, sigterm_watchdog

log = logging.getLogger("sglang.twin")


class _DropHttp2Probe(logging.Filter):
    """The router probes workers with an HTTP/2 preface first; aiohttp logs it as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "PRI/Upgrade" not in str(record.exc_info[1] if record.exc_info else "")


async def _serve(server: TwinServer) -> None:
    cfg, args = server.config, server.args
    server.events.emit(
        "started",
        argv=list(args.argv),
        pid=server.pid,
        overlap_schedule=args.overlap_schedule,
        multi_stream_overlap=server.multi_stream_overlap,
        decode_cuda_graph_bs=server.buckets,
        hazards=server.hazards.as_dict(),
        bootstrap_port=args.bootstrap_port if server.role == "prefill" else None,
        twin_kernel_package=server.kernel.package,
    )
    # Launch phase: SIGTERM/SIGINT stop at once (no TokenizerManager handler yet; uvicorn's
    # own handler during warmup).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runners: list[web.AppRunner] = []
    if server.bootstrap is not None:
        # TokenizerManager init starts it, before the schedulers finish loading
        # (engine.py L1336-1350, disagg_service.py): /health 200 and /route 503 from here on.
        runners.append(await _site(server.bootstrap.app(), args.host, args.bootstrap_port))
        log.info("Bootstrap server started on %s:%d", args.host, args.bootstrap_port)
    log.info("Load weight begin. (model load %.1fs model time)", cfg.model_load_s)
    if await _wait_or_stop(stop, cfg.wall(cfg.model_load_s)):
        return await _shutdown(server, runners)
    engine_task = asyncio.create_task(server.engine.run()) if server.engine else None
    log.info("Capture cuda graph bs %s", server.buckets)
    if await _wait_or_stop(stop, cfg.wall(server.capture_seconds())):
        return await _shutdown(server, runners, engine_task)
    server.ranks_registered()
    # The HTTP port opens once the schedulers are ready (after load and graph capture); the
    # warmup request follows, /health 503 until it is done.
    runners.insert(0, await _site(build_app(server), args.host, args.port))
    if await _wait_or_stop(stop, cfg.wall(cfg.warmup_s)):
        return await _shutdown(server, runners, engine_task)
    server.mark_ready()
    log.info("The server is fired up and ready to roll!")
    # Running phase: the TokenizerManager's SIGTERM handler takes over (SIGINT stays quick).
    loop.add_signal_handler(signal.SIGTERM, on_sigterm, server)
    watchdog = asyncio.create_task(sigterm_watchdog(server))
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({watchdog, stopped}, return_when=asyncio.FIRST_COMPLETED)
    how = watchdog.result() if watchdog.done() else "sigint"
    watchdog.cancel()
    stopped.cancel()
    await _shutdown(server, runners, engine_task, how=how)


async def _site(app: web.Application, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port, reuse_address=True).start()
    return runner


async def _wait_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except TimeoutError:
        return False


async def _shutdown(
    server: TwinServer,
    runners: list[web.AppRunner],
    engine_task: asyncio.Task[None] | None = None,
    how: str = "launch",
) -> None:
    server.status = "shutting_down"
    server.events.emit("shutdown", how=how)
    if engine_task is not None:
        engine_task.cancel()
    for runner in runners:
        await runner.cleanup()
    if server.receiver is not None:
        await server.receiver.close()


def main(argv: list[str] | None = None) -> int:
    # Plugins first, before logging is configured: SGLang's order (launch_server.py L79), so its
    # INFO "Loaded plugin" line is lost here too; a plugin's own stderr line is not.
    packages = load_plugins(os.environ)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(asctime)s] %(message)s")
    logging.getLogger("aiohttp.server").addFilter(_DropHttp2Probe())
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)  # argparse errors exit 2 like SGLang
        config = load_config()
        kernel = resolve_kernel_config(os.environ, list(argv), packages)
    except (StartupError, TwinConfigError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return 1
    for flag in args.ignored:
        if flag.startswith("--"):
            log.info("twin: accepting and ignoring %s", flag)
    if kernel.log_line:
        log.info(kernel.log_line)
    server = TwinServer(args, config, dict(os.environ), kernel)
    log.info(
        "twin pid=%s role=%s port=%d instance=%s",
        server.pid,
        server.role,
        args.port,
        server.instance_id,
    )
    asyncio.run(_serve(server))
    return 0


if __name__ == "__main__":
    sys.exit(main())
