"""Supervisor + agent through both executors (local subprocess and a real OpenSSH server)."""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from dsv4ops.clock import SystemClock
from dsv4ops.remote import (
    AgentCallError,
    ComponentNotReadyError,
    DeployLockError,
    ProcessSpec,
    StopError,
    Supervisor,
    WaitResult,
    lock_holder,
    redact_argv,
)
from testing.ports import free_ports
from testing.remote import toy_argv, wait_for_log_line

pytestmark = pytest.mark.slow
CLOCK = SystemClock()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_start_status_stop_a_detached_component(sup: Supervisor, workdir: Path) -> None:
    port, port2 = free_ports(2)
    hostile = "x; touch pwned $(touch pwned2)"
    spec = ProcessSpec(
        "web",
        toy_argv("--port", port, "--port", port2, hostile, "--api-key", "sk-live-secret"),
        {"PLAIN": "v", "HF_TOKEN": "hf-secret-value"},
        (port, port2),
    )
    state = sup.start(spec)
    assert state.alive and state.pid and state.env == {"PLAIN": "v", "HF_TOKEN": "***"}
    assert sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web") < 20
    # own session and process group: detached from the CLI and from the SSH session
    assert os.getsid(state.pid) == state.pid and os.getpgid(state.pid) == state.pid
    # the agent blocks SIGTERM while it records a start; the component must not inherit that
    sigblk = Path(f"/proc/{state.pid}/status").read_text().split("SigBlk:")[1].split()[0]
    assert int(sigblk, 16) == 0
    now = sup.status(["web"])["web"]
    assert now.alive and now.pid == state.pid and now.ports_open == {port: True, port2: True}
    assert now.argv == tuple(redact_argv(spec.argv))  # hostile value: one argument; key hidden
    assert now.argv[-1] == "***" and hostile in now.argv
    assert f'"{hostile}"' in sup.log_tail("web", 5)
    assert not (workdir / "pwned").exists() and not (workdir / "pwned2").exists()
    run_record = (workdir / "run" / "web.json").read_text()
    assert (
        "hf-secret-value" not in run_record
        and "hf-secret-value" not in sup.http(f"http://127.0.0.1:{port}/").body
    )
    with pytest.raises(AgentCallError, match="already running"):
        sup.start(spec)
    report = sup.stop("web", grace_s=5)
    assert report.was_running and report.signals == ("SIGTERM",) and not report.forced
    after = sup.status(["web"])["web"]
    assert not after.alive and after.ports_open == {port: False, port2: False}
    assert after.exit_code is not None
    assert not _alive(state.pid)
    assert (
        sup.stop("web", grace_s=5).was_running is False
    )  # stopping a stopped component is a no-op


def test_stop_kills_a_child_that_ignores_sigterm(sup: Supervisor, workdir: Path) -> None:
    (port,) = free_ports(1)
    pidfile = workdir.parent / "child.pid"
    sup.start(
        ProcessSpec("web", toy_argv("--port", port, "--child-ignoring-term", pidfile), {}, (port,))
    )
    sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    child = int(pidfile.read_text())
    assert _alive(child)
    report = sup.stop("web", grace_s=0.5)
    assert report.signals == ("SIGTERM", "SIGKILL") and report.forced
    assert not _alive(child)


def test_stop_fails_when_a_port_stays_open(local_sup: Supervisor) -> None:
    port, foreign = free_ports(2)
    local_sup.start(ProcessSpec("web", toy_argv("--port", port), {}, (port,)))
    local_sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    with socket.socket() as squatter:  # someone else's listener on a port the component should own
        squatter.bind(("127.0.0.1", foreign))
        squatter.listen()
        with pytest.raises(
            StopError, match=rf"port {foreign} still open \(held by \[{os.getpid()}\]\)"
        ) as info:
            local_sup.stop("web", ports=[port, foreign], grace_s=2)
    assert info.value.ports_open == [foreign]


def test_wait_http_notices_readiness_within_about_100ms(sup: Supervisor, workdir: Path) -> None:
    (port,) = free_ports(1)
    ready = workdir.parent / "ready"
    # Refuses connections for 0.3 s, then answers 503 until the test creates `ready`: the
    # moment of readiness is the test's, not a guess about how fast things start under load.
    sup.start(
        ProcessSpec(
            "web", toy_argv("--port", port, "--delay", 0.3, "--ready-file", ready), {}, (port,)
        )
    )
    results: list[WaitResult] = []
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            results.append(
                sup.wait_http_result(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    worker = threading.Thread(target=wait)
    worker.start()
    try:
        wait_for_log_line(workdir, "web", "toy: first poll")  # the wait is polling
        CLOCK.sleep(0.4)  # a few more polls, so the mean below covers steady polling
        ready_at = CLOCK.monotonic()  # CLOCK_MONOTONIC is machine-wide: the agent's clock too
    finally:
        ready.touch()
        worker.join(timeout=30)
    assert not errors and len(results) == 1, errors
    res = results[0]
    # The agent's own poll times: it missed before readiness and hit after it.
    assert res.last_miss_at_monotonic is not None and res.hit_started_at_monotonic is not None
    assert res.last_miss_at_monotonic < ready_at < res.detected_at_monotonic
    # Detection granularity is the gap between the last miss and the hit, measured on the
    # target, so neither the SSH/agent round trip nor the server's answer time counts. 50 ms
    # polling gives ~55 ms idle and <= 70 ms with 8 busy processes on 2 cores; a 0.1 s
    # period fails the mean, a 0.2 s one both. A single gap may stretch under load; the mean
    # over the whole wait much less.
    assert res.poll_gap_s is not None and res.poll_gap_s < 0.2, res
    assert res.mean_poll_interval_s is not None and res.mean_poll_interval_s < 0.1, res
    assert res.attempts >= 4  # it really polled while the component was starting
    assert res.detected_at_monotonic - ready_at < 2.0  # sanity: detected, not timed out


def test_wait_http_fails_fast_with_the_log_when_the_process_dies(sup: Supervisor) -> None:
    (port,) = free_ports(1)
    sup.start(
        ProcessSpec(
            "web", toy_argv("--port", port, "--exit-after", 0.3, "--exit-code", 7), {}, (port,)
        )
    )
    t0 = CLOCK.monotonic()
    with pytest.raises(ComponentNotReadyError) as info:
        sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=60, proc_name="web")
    assert CLOCK.monotonic() - t0 < 10  # not the 60 s timeout
    err = info.value
    assert err.reason == "died" and err.component_exit_code == 7
    assert err.exit_code == 2  # the CLI's exit code stays DeployError's, not the component's
    assert "toy: fatal: exiting with 7" in err.log_tail and "toy: fatal" in str(err)


def test_wait_http_timeout_includes_the_log_tail(local_sup: Supervisor) -> None:
    port, other = free_ports(2)
    local_sup.start(ProcessSpec("web", toy_argv("--port", port), {}, (port,)))
    with pytest.raises(ComponentNotReadyError, match=r"not ready after 0\.5s") as info:
        local_sup.wait_http(f"http://127.0.0.1:{other}/", timeout_s=0.5, proc_name="web")
    assert info.value.reason == "timeout" and "toy: starting" in info.value.log_tail


def test_log_is_rotated_on_restart_and_exit_code_recorded(
    local_sup: Supervisor, workdir: Path
) -> None:
    local_sup.start(ProcessSpec("job", toy_argv("--exit-after", 0, "--exit-code", 3, "first")))
    for _ in range(100):
        if local_sup.status(["job"])["job"].exit_code is not None:
            break
        CLOCK.sleep(0.05)
    st = local_sup.status(["job"])["job"]
    assert not st.alive and st.exit_code == 3
    local_sup.start(ProcessSpec("job", toy_argv("--exit-after", 0, "second")))
    assert '"first"' in (workdir / "logs" / "job.log.1").read_text()
    assert '"first"' not in local_sup.log_tail("job", 50)


def test_kill_then_status_reports_dead(local_sup: Supervisor) -> None:
    (port,) = free_ports(1)
    local_sup.start(ProcessSpec("web", toy_argv("--port", port), {}, (port,)))
    assert local_sup.kill("web")
    # Dead (a zombie counts) as soon as the signal lands; the exit code once its monitor has
    # reaped it and written the exit record, a moment later.
    for _ in range(100):
        st = local_sup.status(["web"])["web"]
        if not st.alive and st.exit_code is not None:
            break
        CLOCK.sleep(0.05)
    assert not st.alive and st.exit_code == -9
    assert local_sup.kill("web") is False


def test_preflight_reports_ports_ours_and_foreign(local_sup: Supervisor, workdir: Path) -> None:
    ours, foreign, free = free_ports(3)
    local_sup.start(ProcessSpec("web", toy_argv("--port", ours), {}, (ours,)))
    local_sup.wait_http(f"http://127.0.0.1:{ours}/", timeout_s=20, proc_name="web")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", foreign))
        squatter.listen()
        rep = local_sup.preflight(
            [ours, foreign, free], gpus=[0, 1], paths=[str(workdir), str(workdir / "nope")]
        )
    assert rep.writable and rep.workdir == str(workdir)
    assert rep.ports[ours].in_use and rep.ports[ours].ours
    assert rep.ports[foreign].in_use and not rep.ports[foreign].ours
    assert (os.getpid(), None) in rep.ports[foreign].holders
    assert not rep.ports[free].in_use
    assert rep.paths == {str(workdir): True, str(workdir / "nope"): False}
    if not rep.gpus_available:
        assert rep.gpu_note == "no nvidia-smi"


def test_state_files_round_trip(local_sup: Supervisor, workdir: Path) -> None:
    assert local_sup.read_state("deployed") is None
    local_sup.write_state("deployed", {"profile": "baseline", "n": [1, 2]})
    assert local_sup.read_state("deployed") == {"profile": "baseline", "n": [1, 2]}
    assert [p.name for p in (workdir / "state").iterdir()] == ["deployed.json"]  # no temp left
    with pytest.raises(AgentCallError, match="invalid name"):
        local_sup.write_state("../escape", {})


def test_lock_contention_names_the_holder(sup: Supervisor) -> None:
    first = lock_holder("dsv4ops deploy baseline")
    assert sup.lock_acquire(first) is None
    with pytest.raises(
        DeployLockError, match=rf"held by .*pid {os.getpid()} running 'dsv4ops deploy baseline'"
    ) as info:
        sup.lock_acquire(lock_holder("dsv4ops deploy other"))
    assert not info.value.stale and info.value.holder["op_id"] == first["op_id"]
    with pytest.raises(DeployLockError):
        sup.lock_release("someone-else")
    assert sup.lock_release(first["op_id"]) is True
    assert sup.lock_info() is None and sup.lock_release(first["op_id"]) is False


def test_concurrent_acquires_have_exactly_one_winner(local_sup: Supervisor) -> None:
    sups = [Supervisor(local_sup.executor, local_sup.workdir, local_sup.python) for _ in range(2)]
    for s in sups:
        s.ensure_agent()
    outcomes: list[str] = []

    def grab(s: Supervisor, i: int) -> None:
        try:
            s.lock_acquire(lock_holder(f"deploy {i}"))
            outcomes.append("won")
        except DeployLockError:
            outcomes.append("refused")

    threads = [threading.Thread(target=grab, args=(s, i)) for i, s in enumerate(sups)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["refused", "won"]


def test_stale_lock_is_reported_not_stolen(sup: Supervisor) -> None:
    import subprocess  # a short-lived holder whose pid is then gone

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = dict(lock_holder("dsv4ops deploy crashed"), pid=proc.pid)
    sup.lock_acquire(dead)
    with pytest.raises(DeployLockError, match="left by a dead process") as info:
        sup.lock_acquire(lock_holder("dsv4ops deploy next"))
    assert info.value.stale and info.value.holder["pid"] == proc.pid
    info_now = sup.lock_info()
    assert info_now is not None and info_now.stale and info_now.holder["op_id"] == dead["op_id"]
    mine = lock_holder("dsv4ops deploy next")
    broken = sup.lock_acquire(mine, force=True)
    assert broken is not None and broken.holder["op_id"] == dead["op_id"]
    assert sup.lock_info().holder["op_id"] == mine["op_id"]  # type: ignore[union-attr]
    sup.lock_release(mine["op_id"])


def test_a_recycled_pid_is_never_signalled(local_sup: Supervisor, workdir: Path) -> None:
    import json
    import subprocess

    # A stranger that now owns the pid (and pgid) our record names, but started at another time.
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        local_sup.ensure_agent()
        (workdir / "run").mkdir(parents=True, exist_ok=True)
        record = {
            "name": "web",
            "pid": stranger.pid,
            "pgid": stranger.pid,
            "starttime": 1,
            "ports": [],
        }
        (workdir / "run" / "web.json").write_text(json.dumps(record))
        assert not local_sup.status(["web"])["web"].alive
        assert local_sup.kill("web") is False
        assert local_sup.stop("web", grace_s=0.2).was_running is False
        assert stranger.poll() is None  # untouched
    finally:
        stranger.kill()
        stranger.wait()


def test_http_many_makes_several_requests_in_one_round_trip(
    local_sup: Supervisor, workdir: Path
) -> None:
    sup = local_sup  # the batching is the agent's; SSH is the same one-call path as `http`
    port, port2, closed = free_ports(3)
    not_ready = workdir.parent / "never"  # the second port's server answers 503 until this exists
    sup.start(ProcessSpec("web", toy_argv("--port", port), {}, (port,)))
    sup.start(
        ProcessSpec("boot", toy_argv("--port", port2, "--ready-file", not_ready), {}, (port2,))
    )
    sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    sup.wait_http(f"http://127.0.0.1:{port2}/", timeout_s=20, expect=503, proc_name="boot")
    calls = []
    real_run = sup._run_agent  # one agent round trip (a session's line or a one-shot process)

    def counting_run(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[1])
        return real_run(*args, **kwargs)

    sup._run_agent = counting_run  # type: ignore[method-assign]
    t0 = CLOCK.monotonic()
    replies = sup.http_many(
        [
            f"http://127.0.0.1:{port}/a",
            {"url": f"http://127.0.0.1:{port}/b", "method": "GET", "headers": {"X-T": "1"}},
            f"http://127.0.0.1:{port2}/",
            f"http://127.0.0.1:{closed}/",
            *[f"http://127.0.0.1:{port}/sleep/1" for _ in range(4)],
        ],
        timeout_s=5,
    )
    wall = CLOCK.monotonic() - t0
    assert len(calls) == 1  # one agent round trip for all of them
    assert [r.status for r in replies] == [200, 200, 503, None, 200, 200, 200, 200]
    assert '"/a"' in replies[0].body and '"/b"' in replies[1].body  # in the order asked
    assert replies[3].error and replies[3].body == ""
    assert all(r.elapsed_s >= 1.0 for r in replies[4:])
    assert wall < 3.0  # concurrent on the target: four 1 s requests in series would take 4 s
    assert sup.http_many([]) == []
    with pytest.raises(ValueError, match="needs a url"):
        sup.http_many([{"url": f"http://127.0.0.1:{port}/", "verb": "GET"}])  # type: ignore[list-item]
