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
    lock_holder,
    redact_argv,
)
from testing.ports import free_ports
from tests.remote.conftest import toy_argv

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
    assert sup.stop("web").was_running is False  # stopping a stopped component is a no-op


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
    listen_file = workdir.parent / "listening"
    sup.start(
        ProcessSpec(
            "web",
            toy_argv("--port", port, "--delay", 0.8, "--listen-file", listen_file),
            {},
            (port,),
        )
    )
    res = sup.wait_http_result(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    delay = res.detected_at_monotonic - float(listen_file.read_text())
    # 50 ms polling: ~25 ms on average; 0.3 s leaves room for a loaded 2-core machine, while a
    # 1 s poll period would fail this most of the time.
    assert 0 <= delay < 0.3, delay
    assert res.attempts > 3  # it really polled while the component was starting


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
    assert err.reason == "died" and err.exit_code == 7
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
    for _ in range(100):
        if not local_sup.status(["web"])["web"].alive:
            break
        CLOCK.sleep(0.05)
    st = local_sup.status(["web"])["web"]
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
