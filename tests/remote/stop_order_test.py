"""Stop gives the server process its own graceful shutdown before the group is signalled."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from dsv4ops.remote import ProcessSpec, Supervisor
from testing.ports import free_ports
from testing.remote import toy_argv

pytestmark = pytest.mark.slow


def test_stop_sigterms_the_server_process_only_then_kills_what_it_left(
    local_sup: Supervisor, workdir: Path
) -> None:
    (port,) = free_ports(1)
    log = workdir.parent / "term.log"
    local_sup.start(
        ProcessSpec(
            "web",
            toy_argv("--port", port, "--graceful-term", "0.6", "--term-log", log),
            {},
            (port,),
        )
    )
    local_sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    report = local_sup.stop("web", grace_s=10)
    lines = log.read_text().splitlines()
    # the server got SIGTERM and its full graceful time; its child ("scheduler") never got a
    # SIGTERM from the stop: it was killed after the server had exited
    assert [x.split()[1] for x in lines] == ["TERM", "exit"]
    assert all(x.startswith("main") for x in lines)
    took = float(lines[1].split()[2]) - float(lines[0].split()[2])
    assert took >= 0.6
    assert report.signals == ("SIGTERM", "SIGKILL")
    state = local_sup.status(["web"])["web"]
    assert not state.alive and state.ports_open == {port: False}


def test_stop_of_a_twin_worker_takes_sglangs_graceful_path(
    local_sup: Supervisor, workdir: Path
) -> None:
    port, boot = free_ports(2)
    events = workdir.parent / "events.jsonl"
    argv = (
        sys.executable,
        "-m",
        "dsv4ops.twin.launch_server",
        "--model-path",
        "/m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--disaggregation-mode",
        "prefill",
        "--disaggregation-bootstrap-port",
        str(boot),
    )
    env = {
        "DSV4_TWIN_TIME_SCALE": "0.05",
        "DSV4_TWIN_MODEL_LOAD_S": "0.2",
        "DSV4_TWIN_WARMUP_S": "0.2",
        "DSV4_TWIN_SCHEDULER_EXIT_S": "10",
        "DSV4_TWIN_EVENT_LOG": str(events),
    }
    local_sup.start(ProcessSpec("prefill", argv, env, (port, boot)))
    local_sup.wait_http(f"http://127.0.0.1:{port}/health", timeout_s=30, proc_name="prefill")
    t0 = time.monotonic()
    report = local_sup.stop("prefill", grace_s=10)
    took = time.monotonic() - t0
    assert report.signals == ("SIGTERM",)  # it exited by itself, nothing was killed
    shutdown = [json.loads(x) for x in events.read_text().splitlines()][-1]
    assert shutdown["event"] == "shutdown" and shutdown["how"] == "graceful"
    assert took >= 10 * 0.05  # the schedulers' exit time was waited for
    assert local_sup.status(["prefill"])["prefill"].ports_open == {port: False, boot: False}
