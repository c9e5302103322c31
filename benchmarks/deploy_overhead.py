"""Orchestration overhead of `deploy` on the twin with the real router (local executor).

Measured side by side in one run:
  * total deploy time (preflight to known-good) per deploy;
  * each component's own start-up: prefill/decode from process exec (/proc start time) to the
    twin's own `ready` event; the router from exec to its first /readiness 200 seen by a 5 ms
    poller started next to it (a separate launch against the same workers);
  * overhead = total - sum of own start-ups (drain, stops, agent calls, probe, journal, lock);
    a redeploy's drain includes the router's own graceful exit after SIGTERM (~1 s idle);
  * readiness-detection delay = when the deploy saw a worker ready - when the twin became ready
    (issue 4 asks for ~100 ms).

Usage: python benchmarks/deploy_overhead.py [--deploys N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testing.orchestrate import kill_all, make_env, read_events  # noqa: E402


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime"):
            return float(line.split()[1])
    raise RuntimeError("no btime")


def _float(value: object) -> float:
    assert isinstance(value, int | float), value  # the twin's event "ts" is epoch seconds
    return float(value)


def _pid(pid: int | None) -> int:
    assert pid is not None, "a component the deploy just started has no pid"
    return pid


def exec_time(pid: int) -> float:
    """Epoch seconds at which `pid` was started (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return _boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def router_own_startup(argv: list[str], port: int, env: dict[str, str]) -> float:
    """Start the router alone (same argv, another port) and time exec -> /readiness 200 at 5 ms."""
    argv = list(argv)
    argv[argv.index("--port") + 1] = str(port)
    argv[argv.index("--prometheus-port") + 1] = str(port + 1)
    t0 = time.time()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.time() - t0 < 60:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readiness", timeout=1) as r:
                    if r.status == 200:
                        return time.time() - t0
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError("router never became ready")
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deploys", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dsv4ops-bench-"))
    env = make_env(root)
    os.environ.update(env.environ)
    from dsv4ops.cli import _context as C
    from dsv4ops.orchestrate.restore import fallback_for
    from dsv4ops.usecases import compose, render

    detected: dict[str, float] = {}
    rows = []
    try:
        for i in range(args.deploys):
            profile = "baseline" if i % 2 == 0 else "buckets-step4"
            ctx = C.open_target(env.target, verb="deploy")
            sup = ctx.supervisor
            real_wait = sup.wait_http

            def wait(url: str, *, _real: Callable[..., float] = real_wait, **kw: Any) -> float:
                elapsed = _real(url, **kw)
                detected[kw.get("proc_name") or url] = time.time()
                return elapsed

            # the bench stamps when each wait returns: it wraps this instance's method
            sup.wait_http = wait  # type: ignore[method-assign]
            op = compose.operator_for(
                ctx, progress=lambda _l: None, canary=None, model="dsv4", command="bench"
            )
            mark = len(read_events(env))
            new = render.deployment_for(profile, ctx.target)
            out = op.deploy(
                new,
                fallback=fallback_for(ctx.journal, render.render_at_commit(ctx.target)),
                run_canary=False,
            )
            assert out.ok, out.message
            states = sup.status(["prefill", "decode", "router"])
            events = read_events(env)[mark:]
            ready = {str(e["role"]): _float(e["ts"]) for e in events if e.get("event") == "ready"}
            own = {n: ready[n] - exec_time(_pid(states[n].pid)) for n in ("prefill", "decode")}
            router = new.component("router")
            own["router"] = router_own_startup(list(router.argv), router.port + 7, dict(os.environ))
            # Detection: the deploy waits for the prefill's /health and then its bootstrap server;
            # the decode's detection is the clean one (a single /health wait).
            delays = {n: detected[n] - ready[n] for n in ("prefill", "decode")}
            overhead = out.total_s - sum(own.values())
            rows.append((profile, out.total_s, own, overhead, delays))
            ctx.close()
        op = compose.operator_for(
            C.open_target(env.target, verb="stop"),
            progress=lambda _l: None,
            canary=None,
            model="dsv4",
            command="bench",
        )
        op.stop()
    finally:
        kill_all(env)

    print("deploy overhead on the twin (local executor, real sglang-router)")
    for profile, total, own, overhead, delays in rows:
        print(
            f"  {profile:14s} total {total:6.2f}s  own start-up prefill {own['prefill']:.2f}s "
            f"decode {own['decode']:.2f}s router {own['router']:.2f}s  -> overhead {overhead:6.2f}s "
            f"({overhead / total:.0%} of the deploy)"
        )
        print(
            f"  {'':14s} readiness detection delay: prefill {delays['prefill'] * 1000:.0f} ms "
            f"(incl. its bootstrap check), decode {delays['decode'] * 1000:.0f} ms"
        )
    med = statistics.median(d["decode"] for *_, d in rows)
    ratio = statistics.median(o / t for _, t, _, o, _ in rows)
    print(f"median decode readiness detection delay: {med * 1000:.0f} ms (target ~100 ms)")
    print(f"median overhead / total deploy time: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
