"""Test helpers and doubles for `dsv4ops.orchestrate` (one module per package area).

- env: Test/demo/benchmark environment for deploy/status/rollback on the twin with the real router.

`make_env(root)` builds, under `root`:
  * a git repository holding the shipped profiles plus fault-injection variants (committed, so
    rollback reads them from git at a commit, as in production);
  * targets.yaml with a local twin target on free high ports (a port offset), fast twin start-up
    and a shared twin event log;
  * the work directory the components run in (their cwd, which is how orphans are found).

`our_processes(env)` lists live processes whose cwd is that work directory; `kill_all(env)` is the
teardown safety net (SIGKILL every recorded process group and every such process).
- cli: Helpers for the orchestrate and CLI tests on a twin environment (testing/orchestrate.py):
its module-scoped lifetime, `dsv4ops ARGS --target T` in-process, the Operator as the CLI
composes it, and the check that the baseline was restored.
- fake_control: A scripted stand-in for the Supervisor (unit tests of the engine's decisions), the small
deployment and the Operator over it that those tests share.

It returns the Supervisor's own result types (dsv4ops/remote/results.py), so it satisfies the
`TargetControl` protocol as the real one does (`_satisfies_the_protocol` below, checked by mypy
in tests/architecture/mypy_test.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.cli import main
from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import DeployError
from dsv4ops.journal.gates import GateVerdict
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.operation import Progress
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.recorded import RecordedProfile
from dsv4ops.remote.base import ProcessSpec, ProcessState
from dsv4ops.remote.errors import ComponentNotReadyError, DeployLockError
from dsv4ops.remote.results import HttpReply, LockInfo, PortUse, PreflightReport, StopReport
from dsv4ops.timings import TARGET_HTTP_S
from dsv4ops.usecases.session import TargetSession
from testing.clock import FakeClock
from testing.ports import reserve_ports

# --- env (was testing/orchestrate.py) ---

SHIPPED_PROFILES = Path(__file__).resolve().parent.parent / "profiles"
BASE_PORTS = (30000, 30001, 8998, 8000, 29000)
FAST_TWIN_ENV = {
    "DSV4_TWIN_MODEL_LOAD_S": "0.2",
    "DSV4_TWIN_CAPTURE_S_PER_BUCKET": "0.005",
    "DSV4_TWIN_WARMUP_S": "0.2",
    "DSV4_TWIN_TIME_SCALE": "0.05",
    # and the SIGTERM path, as testing/twin.py's FAST_ENV: SGLang's watchdog tick (5 s) and
    # the schedulers' exit (3 s) would make every stop 0.4 s of wall time at this scale.
    "DSV4_TWIN_SIGTERM_TICK_S": "0.2",
    "DSV4_TWIN_SCHEDULER_EXIT_S": "0.2",
    # A lost KV transfer hangs until the bootstrap timeout (300 model s): keep it to ~1 s here.
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "20",
    "DSV4_TWIN_WAITING_TIMEOUT_S": "20",
}

# Fault-injection profiles, each extending the safe baseline.
VARIANTS = {
    # The twin's bootstrap degradation forced: /health stays 200, every KV transfer is lost.
    "degraded": """\
schema_version: 1
extends: baseline
description: baseline with the twin's bootstrap degradation forced (probe must fail)
prefill:
  env: {DSV4_TWIN_FORCE: degrade, DSV4_TWIN_DEGRADE_FAIL_FRACTION: "1.0"}
decode:
  env: {DSV4_TWIN_FORCE: degrade, DSV4_TWIN_DEGRADE_FAIL_FRACTION: "1.0"}
""",
    # Decode keeps "loading weights" for ~3 hours: it never answers /health 200.
    "decode-never-ready": """\
schema_version: 1
extends: baseline
description: baseline whose decode never becomes ready
decode:
  env: {DSV4_TWIN_MODEL_LOAD_S: "200000"}
""",
    # Multi-stream overlap on (the tool-call corruption hazard) with a canary small enough for a
    # 2-core test machine: the deploy's flag-aware canary runs smoke + corruption on it.
    "multi-stream-canary": """\
schema_version: 1
extends: multi-stream-on
description: multi-stream overlap on, small canary (corruption suite at 16 sessions)
canary:
  smoke_requests: 4
  stress_concurrency: 16
""",
    # The router's interpreter cannot start (profiles reject unknown router flags, so break its
    # environment instead): it exits at once with a fatal error in its log.
    "router-broken": """\
schema_version: 1
extends: baseline
description: baseline whose router cannot start
router:
  env: {PYTHONHOME: /nonexistent-dsv4ops-test}
""",
}


@dataclass(frozen=True)
class OrchEnv:
    root: Path
    profiles_dir: Path
    state_dir: Path
    workdir: Path
    event_log: Path
    target: str
    offset: int

    @property
    def environ(self) -> dict[str, str]:
        return {
            "DSV4OPS_PROFILES_DIR": str(self.profiles_dir),
            "DSV4OPS_STATE_DIR": str(self.state_dir),
        }

    def port(self, base: int) -> int:
        return base + self.offset


def pick_offset(rng: random.Random | None = None) -> int:
    """A port offset that puts all five profile ports on free ports (below the ephemeral range),
    reserved for this process like testing/ports.py's: two xdist workers (or two checkouts'
    runs) never get offsets whose ports overlap, even before their twins bind them."""
    rng = rng or random.Random()
    for _ in range(200):
        offset = rng.randrange(1000, 2300)  # 30000+offset stays below 32768 (ephemeral range)
        if reserve_ports(p + offset for p in BASE_PORTS):
            return offset
    raise RuntimeError("no free port offset found")


def _git(args: list[str], cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_env(
    root: Path,
    *,
    target: str = "twin-test",
    extra_twin_env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> OrchEnv:
    profiles = root / "repo" / "profiles"
    profiles.mkdir(parents=True)
    for f in SHIPPED_PROFILES.glob("*.yaml"):
        if f.name != "targets.yaml":
            shutil.copy(f, profiles / f.name)
    for name, text in VARIANTS.items():
        (profiles / f"{name}.yaml").write_text(text)
    offset = pick_offset()
    workdir = root / "work"
    event_log = root / "twin-events.jsonl"
    twin_env = {**FAST_TWIN_ENV, "DSV4_TWIN_EVENT_LOG": str(event_log), **(extra_twin_env or {})}
    env_lines = "\n".join(f"      {k}: {json.dumps(v)}" for k, v in sorted(twin_env.items()))
    (profiles / "targets.yaml").write_text(
        f"""schema_version: 1
targets:
  {target}:
    description: test twin on free ports
    transport: local
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    workdir: {workdir}
    python: {python}
    launcher: twin
    bind_host: 127.0.0.1
    connect_host: 127.0.0.1
    port_offset: {offset}
    twin_env:
{env_lines}
"""
    )
    repo = root / "repo"
    _git(["init", "-q"], repo)
    _git(["-c", "user.email=t@example.com", "-c", "user.name=test", "add", "-A"], repo)
    _git(
        [
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=test",
            "commit",
            "-q",
            "-m",
            "profiles",
        ],
        repo,
    )
    state = root / "state"
    state.mkdir()
    return OrchEnv(root, profiles, state, workdir, event_log, target, offset)


REAL_BOX = """\
  box:
    description: a real box over SSH (never contacted here)
    transport: ssh
    ssh: {host: dsv4-box.invalid, port: 22, user: ops}
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    workdir: /opt/dsv4ops
    python: /usr/bin/python3
    launcher: sglang
    bind_host: 0.0.0.0
    connect_host: dsv4-box.invalid
    port_offset: 0
"""


def add_real_box(env: OrchEnv) -> str:
    """Add a target `box` run by real SGLang over SSH (an .invalid host: never contacted) to the
    environment's targets.yaml, for the refusals of twin-only verbs; returns its name."""
    targets = env.profiles_dir / "targets.yaml"
    targets.write_text(targets.read_text() + REAL_BOX)
    return "box"


def commit_all(env: OrchEnv, message: str) -> None:
    repo = env.profiles_dir.parent
    _git(["-c", "user.email=t@example.com", "-c", "user.name=test", "add", "-A"], repo)
    _git(
        ["-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", message],
        repo,
    )


def our_processes(env: OrchEnv) -> list[int]:
    """Live processes running in the environment's work directory (components and strays)."""
    found = []
    want = str(env.workdir.resolve())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") != want:
                continue
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry))
    return sorted(found)


def kill_all(env: OrchEnv) -> None:
    """Teardown safety net: SIGKILL recorded process groups, then anything left in the workdir."""
    from testing.remote import kill_recorded_groups

    kill_recorded_groups(env.workdir)
    for pid in our_processes(env):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def read_events(env: OrchEnv) -> list[dict[str, object]]:
    try:
        return [json.loads(line) for line in env.event_log.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


# --- cli (was testing/orchestrate.py) ---


def set_gate_duration(env: OrchEnv, seconds: float) -> None:
    """Make the env's copy of the shipped baseline (which every shipped profile extends) gate each
    flag-aware suite for `seconds` (`canary.gate_duration_s`; commit it with `commit_all`)."""
    path = env.profiles_dir / "baseline.yaml"
    text = path.read_text()
    line = re.compile(r"^  gate_duration_s: 20\b", re.MULTILINE)
    assert len(line.findall(text)) == 1, "the shipped baseline sets canary.gate_duration_s: 20"
    path.write_text(line.sub(f"  gate_duration_s: {seconds}", text))


def module_env(
    tmp_path_factory: pytest.TempPathFactory,
    extra_twin_env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> Iterator[OrchEnv]:
    """Body of a module-scoped environment fixture: build it, then stop and kill everything
    (`python`: the target's)."""
    env = make_env(tmp_path_factory.mktemp("orch"), extra_twin_env=extra_twin_env, python=python)
    yield env
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.environ.items():
            mp.setenv(k, v)
        with contextlib.suppress(Exception):
            main(["stop", "--target", env.target, "--yes", "--recover"])
    kill_all(env)
    assert our_processes(env) == [], "orphaned processes after the module's teardown"


def cli(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, Any, str]:  # stdout: parsed JSON with --json, else text
    """Run `dsv4ops ARGS --target T`; parse stdout as JSON when --json was given."""
    code = main([*args, "--target", env.target])
    out, err = capsys.readouterr()
    if "--json" in args and out.strip():
        return code, json.loads(out), err
    return code, out, err


def cli_operator(
    env: OrchEnv, progress: Progress | None = None, **kw: object
) -> tuple[Operator, TargetSession]:
    """(Operator, TargetContext) for the env's target, as the CLI composes them."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.compose import operator_for

    ctx = open_target(env.target, verb="test")
    op = operator_for(
        ctx,
        progress=progress or (lambda _l: None),
        canary=None,
        model="deepseek-v4-flash",
        command="test",
    )
    for k, v in kw.items():  # settings the CLI composes differently (e.g. kernels=None)
        assert hasattr(op.settings, k), f"Operator has no setting {k!r}"
        setattr(op.settings, k, v)
    return op, ctx


# **kw: Operator.deploy's keyword arguments, passed through as given.
def deploy_via_operator(
    env: OrchEnv, profile: str, progress: Progress | None = None, **kw: Any
) -> Outcome:
    """Deploy like the CLI does (fallback = last known-good from git), with a progress hook."""
    from dsv4ops.orchestrate.restore import fallback_for
    from dsv4ops.usecases import render as R

    op, ctx = cli_operator(env, progress)
    try:
        new = R.deployment_for(profile, ctx.target)
        fallback = fallback_for(ctx.journal, R.render_at_commit(ctx.target))
        return op.deploy(new, fallback=fallback, run_canary=False, **kw)
    finally:
        ctx.close()


def assert_baseline_restored(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """Previous deployment restored and healthy, exactly our three processes, journal consistent."""
    from dsv4ops.journal.store import Journal

    code, st, err = cli(env, capsys, "status", "--json")
    assert code == 0, err
    assert st["healthy"], st
    assert st["deployed"]["profile"] == "baseline"
    assert st["drift"] == [] and st["attention"] == [] and st["lock"] is None
    assert len(our_processes(env)) == 3, "orphaned or missing processes"
    pids = sorted(c["pid"] for c in st["components"])
    assert pids == our_processes(env)
    j = Journal(env.target)
    assert j.in_flight() == [] and j.skipped_lines == []


# --- fake_control (was testing/orchestrate.py) ---

STREAM_OK = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":" there."},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)
TOOL_OK = json.dumps(
    {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                }
            }
        ]
    }
)
METRICS_IDLE = (
    '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank="0"} 0\n'
    '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{tp_rank="0"} 0\n'
)


def Reply(status: int | None, body: str = "", error: str | None = None) -> HttpReply:  # noqa: N802
    return HttpReply(status, body, error, 0.01)


@dataclass
class FakeControl:
    workdir: str = "/work"
    calls: list[str] = field(default_factory=list)
    running: dict[str, int] = field(default_factory=dict)
    fail_url: str | None = None  # readiness waits on URLs containing this fail (a timeout)
    fail_probe: bool = False
    lock: dict[str, Any] | None = None
    lock_stale: bool = False
    busy_ports: dict[int, bool] = field(default_factory=dict)
    busy_metric_reads: int = 0  # this many /metrics reads report 2 running requests
    router_drain_polls: int = 0  # after SIGTERM the router stays alive for this many status reads
    unreadable_metrics: bool = False  # /metrics answers 404 (running/queued unknown)
    # A wedged decode: busy reads also say realtime_tokens_total{mode="decode"} is stuck here.
    frozen_decode_tokens: float | None = None
    graces: list[tuple[str, float]] = field(default_factory=list)  # (name, grace_s) of each stop
    _terminating: dict[str, int] = field(default_factory=dict)
    _next_pid: int = 1000

    def actions(self) -> list[str]:
        """Calls without the /metrics reads of the drain."""
        return [c for c in self.calls if c != "metrics"]

    def start(self, spec: ProcessSpec) -> ProcessState:
        self.calls.append(f"start {spec.name}")
        self._next_pid += 1
        self.running[spec.name] = self._next_pid
        return ProcessState(
            spec.name, self._next_pid, True, started_at="t", argv=spec.argv, env=spec.env
        )

    def stop(self, name: str, ports: Sequence[int] | None = None, *, grace_s: float) -> StopReport:
        self.calls.append(f"stop {name}")
        self.graces.append((name, grace_s))
        self._terminating.pop(name, None)
        pid = self.running.pop(name, None)
        was = pid is not None
        return StopReport(name, pid, was, ("SIGTERM",) if was else (), 0.01)

    def kill(self, name: str, signal: str = "KILL", group: bool = False) -> bool:
        self.calls.append(f"kill {signal} {name}")
        if name not in self.running:
            return False
        self._terminating[name] = self.router_drain_polls
        return True

    def status(
        self, names: Iterable[str], ports: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, ProcessState]:
        for n, left in list(self._terminating.items()):
            if left <= 0:
                self.running.pop(n, None)
                del self._terminating[n]
            else:
                self._terminating[n] = left - 1
        return {
            n: ProcessState(n, self.running.get(n), n in self.running, started_at="t")
            for n in names
        }

    def log_tail(self, name: str, lines: int = 50) -> str:
        return f"{name} log"

    def wait_http(
        self,
        url: str,
        *,
        timeout_s: float,
        expect: int | Sequence[int] | None = 200,
        proc_name: str | None = None,
    ) -> float:
        self.calls.append(f"wait {proc_name} {url.split('/', 3)[-1]}")
        if self.fail_url and self.fail_url in url:
            raise DeployError(f"{proc_name} not ready: timeout\n--- last log lines ---\nboom")
        return 0.05

    def http_many(
        self, requests: Sequence[str | Mapping[str, Any]], *, timeout_s: float = TARGET_HTTP_S
    ) -> list[HttpReply]:
        """One `http` per request, in order (subclasses that change `http` change these too)."""
        out = []
        for r in requests:
            item: dict[str, Any] = {"url": r} if isinstance(r, str) else dict(r)
            out.append(
                self.http(
                    str(item["url"]),
                    method=str(item.get("method", "GET")),
                    body=item.get("body"),
                    headers=item.get("headers"),
                    timeout_s=float(item.get("timeout_s", timeout_s)),
                )
            )
        return out

    def http(
        self,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = TARGET_HTTP_S,
    ) -> HttpReply:
        if url.endswith("/metrics"):
            self.calls.append("metrics")
            if self.unreadable_metrics:
                return Reply(404, "not found")
            if self.busy_metric_reads > 0:
                self.busy_metric_reads -= 1
                body = METRICS_IDLE.replace("} 0\n", "} 2\n", 1)
                if self.frozen_decode_tokens is not None:
                    body += (
                        "# TYPE sglang:realtime_tokens counter\nsglang:realtime_tokens_total"
                        f'{{tp_rank="0",mode="decode"}} {self.frozen_decode_tokens}\n'
                    )
                return Reply(200, body)
            return Reply(200, METRICS_IDLE)
        if url.endswith("/v1/chat/completions"):
            self.calls.append("probe")
            if self.fail_probe:
                return Reply(504, '{"error": "transfer lost"}')
            return Reply(200, STREAM_OK if json.loads(body or "{}").get("stream") else TOOL_OK)
        return Reply(200, "{}")

    def preflight(
        self, ports: Iterable[int], gpus: Iterable[int], paths: Iterable[str] = ()
    ) -> PreflightReport:
        return PreflightReport(
            host="fake",
            workdir=self.workdir,
            writable=True,
            writable_error=None,
            ports={p: PortUse(self.busy_ports.get(p, False), ((4242, None),)) for p in ports},
            gpus_available=False,
            gpu_note="no nvidia-smi",
            gpus_busy={},
            gpus_missing=(),
            paths={p: True for p in paths},
        )

    def lock_acquire(self, holder: Mapping[str, Any], force: bool = False) -> LockInfo | None:
        if self.lock is not None and not force:
            raise DeployLockError(
                f"deploy lock is held by pid {self.lock.get('pid')}",
                holder=self.lock,
                stale=self.lock_stale,
                hint=None,
            )
        self.calls.append("lock" + (" (forced)" if force else ""))
        self.lock = dict(holder)
        return None

    def lock_release(self, op_id: str) -> bool:
        if self.lock and self.lock.get("op_id") == op_id:
            self.lock = None
            self.calls.append("unlock")
            return True
        return False

    def lock_info(self) -> LockInfo | None:
        return LockInfo(self.lock, self.lock_stale) if self.lock else None


def _satisfies_the_protocol(fake: FakeControl) -> TargetControl:
    return fake  # mypy: FakeControl is a TargetControl


def with_recorded(
    deployment: Deployment,
    *,
    content: Mapping[str, object] | None = None,
    flags: Mapping[str, object] | None = None,
) -> Deployment:
    """`deployment` carrying `content` as its resolved profile and `flags` as its flags, as a
    render or a journal record would (read back through their declarations)."""
    return dataclasses.replace(deployment, recorded=RecordedProfile(content, flags))


def make_deployment(name: str, offset: int = 0) -> Deployment:
    """A three-component deployment (prefill, decode, router); `offset` shifts the worker ports."""
    py = "/usr/bin/python3"
    return Deployment(
        profile_name=name,
        git_commit="c0ffee" + name,
        components=(
            Component(
                "prefill",
                (
                    py,
                    "-m",
                    "sglang.launch_server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(30000 + offset),
                    "--disaggregation-bootstrap-port",
                    "8998",
                ),
                {},
                "127.0.0.1",
                30000 + offset,
                (30000 + offset, 8998),
            ),
            Component(
                "decode",
                (py, "-m", "sglang.launch_server", "--port", str(30001 + offset)),
                {"X": name},
                "127.0.0.1",
                30001 + offset,
                (30001 + offset,),
            ),
            Component(
                "router",
                (py, "-m", "sglang_router.launch_router", "--port", "8000"),
                {},
                "127.0.0.1",
                8000,
                (8000, 29000),
            ),
        ),
    )


def journal_session(target: str, journal: Any = None) -> Any:
    """A TargetSession on `target` (from the profiles dir in use) whose journal is `journal`
    (default: the state directory's file), for the use cases that only read a session's
    journal (`session.reachable`, the canary's endpoint); its supervisor is never called."""
    from dsv4ops.journal.store import Journal
    from dsv4ops.profiles import get_target
    from dsv4ops.remote import Supervisor, connect
    from dsv4ops.usecases.session import TargetSession

    t = get_target(target)
    workdir = t.workdir if t.workdir.startswith("/") else "/nonexistent"
    return TargetSession(t, Supervisor(connect("local"), workdir), journal or Journal(target))


def passing_gate(_deployment: Deployment, _router_url: str) -> tuple[GateVerdict, list[str]]:
    """A canary gate that passes (the unit tests' deploys are gated, so known-good)."""
    return GateVerdict.PASS, ["smoke: PASS"]


def operator(
    control: TargetControl,
    journal: Any,
    lines: list[str] | None = None,
    *,
    gate: Any = passing_gate,
) -> Operator:
    """The engine over `control` with a fake clock and a canary gate that passes (`gate=None`:
    none, like `--no-canary`); progress lines go to `lines` when given."""
    return Operator(
        control,
        journal,
        host="fake",
        clock=FakeClock(),
        progress=(lines.append if lines is not None else None),
        canary=gate,
    )


# -- FakeControl variants of single test modules -------------------------------------------------

KERNELS_PKG = "dsv4-decode-kernels"
KERNELS_REF = f"{KERNELS_PKG}@0.2.0"


@dataclass
class SglangControl(FakeControl):
    """FakeControl whose decode answers /server_info like the twin (`twin_kernel_package`) or,
    with `twin=False`, like real SGLang (no such key), and whose decode log is `decode_log`, by
    default the evidence a decode that loaded `reported` prints (kernels/loaded.py): the
    plugin's line and SGLang finding the package's MoE config."""

    twin: bool = True
    reported: str | None = KERNELS_REF
    decode_log: str | None = None
    log_reads: int = 0

    def evidence(self) -> str:
        if not self.reported:
            return "decode log"
        name, _, version = self.reported.partition("@")
        return (
            f"[dsv4ops-kernel-plugin] loaded {name} {version} pid=7 hooks=none\n"
            f"Using MoE kernel config from /work/kernels/{name}/{version}/configs/triton_3_8_0/"
            "E=256,N=512,device_name=X,dtype=fp8_w8a8,block_shape=[128, 128].json.\n"
        )

    def http(
        self,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = TARGET_HTTP_S,
    ) -> HttpReply:
        if url.endswith("/server_info"):
            info: dict[str, Any] = {"version": "0.5.23", "internal_states": [{}]}
            if self.twin:
                name, _, version = (self.reported or "").partition("@")
                info["twin_kernel_package"] = (
                    {"name": name, "version": version} if self.reported else None
                )
            return Reply(200, json.dumps(info))
        return super().http(url, method=method, body=body, headers=headers, timeout_s=timeout_s)

    def log_tail(self, name: str, lines: int = 50) -> str:
        self.log_reads += 1
        if name != "decode":
            return super().log_tail(name, lines)
        return self.evidence() if self.decode_log is None else self.decode_log


class SignallingControl(FakeControl):
    """Sends a real signal to this process when a given call happens (the n-th time)."""

    def __init__(self) -> None:
        super().__init__()
        self.plan: list[tuple[str, int]] = []  # (call prefix, signal), consumed in order

    def _maybe(self, call: str) -> None:
        if self.plan and call.startswith(self.plan[0][0]):
            _, sig = self.plan.pop(0)
            os.kill(os.getpid(), sig)

    def wait_http(self, url: str, **kw: Any) -> float:
        self._maybe(f"wait {kw.get('proc_name')}")
        return super().wait_http(url, **kw)

    def http(self, url: str, **kw: Any) -> HttpReply:
        if url.endswith("/metrics"):
            self._maybe("metrics")
        return super().http(url, **kw)

    def start(self, spec: ProcessSpec) -> ProcessState:
        result = super().start(spec)
        self._maybe(f"start {spec.name}")  # arrives while the start step is in flight
        return result


@dataclass
class StartWatchingControl(FakeControl):
    """FakeControl that, as each component starts, keeps the (step, phase) records then on disk
    in the journal file `journal` (in `at_start`, by component)."""

    journal: Path | None = None
    at_start: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def start(self, spec: ProcessSpec) -> ProcessState:
        assert self.journal is not None
        records = [json.loads(line) for line in self.journal.read_text().splitlines()]
        self.at_start[spec.name] = [(r["name"], r["phase"]) for r in records if r["type"] == "step"]
        return super().start(spec)


@dataclass
class RecordingControl(FakeControl):
    """FakeControl that keeps the JSON body of every HTTP request it is sent (in `sent`)."""

    sent: list[dict[str, Any]] = field(default_factory=list)

    def http(
        self,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = TARGET_HTTP_S,
    ) -> HttpReply:
        if body:
            self.sent.append(json.loads(body))
        return super().http(url, method=method, body=body, headers=headers, timeout_s=timeout_s)


@dataclass
class PrefillDiesWhileRouterWaits(FakeControl):
    """The new prefill exits once the new router has started; the router's readiness then only
    ever times out (a router whose prefill is gone answers 503), slice after slice."""

    armed: bool = False  # the next router start kills the prefill
    router_waits: int = 0

    def wait_http(
        self,
        url: str,
        *,
        timeout_s: float,
        expect: int | Sequence[int] | None = 200,
        proc_name: str | None = None,
    ) -> float:
        if proc_name == "router" and "prefill" not in self.running:
            self.calls.append("wait router readiness (timed out)")
            self.router_waits += 1
            raise ComponentNotReadyError(
                "router not ready: timeout",
                url=url,
                reason="timeout",
                elapsed_s=timeout_s,
                name="router",
                log_tail="",
                component_exit_code=None,
                last="HTTP 503: no healthy prefill",
            )
        return super().wait_http(url, timeout_s=timeout_s, expect=expect, proc_name=proc_name)

    def start(self, spec: ProcessSpec) -> ProcessState:
        state = super().start(spec)
        if spec.name == "router" and self.armed:
            self.armed = False
            self.running.pop("prefill")
        return state


# --- the real SGLang 0.5.23 target (`make test-real-sglang`, never `make test`) ---
# A git repo holding `tiny-cpu` and a target on free ports whose workdir sits next to the shipped
# one (the profile's ../model and ../shim resolve the same), each verb run through `cli.main` as
# a user runs it, and the decode's scheduler process found for the fault tests.

REPO_ROOT = Path(__file__).resolve().parents[1]
# resolved: a checkout whose .dsv4ops/sglang-cpu links to another's env reaches the same journal,
# which is never read through a symbolic link
REAL_ENV_DIR = Path(
    os.environ.get("REAL_SGLANG") or REPO_ROOT / ".dsv4ops" / "sglang-cpu"
).resolve()
# setup.sh, setup_pd.sh and setup_tools.sh (tiny-cpu's tool model and deepseek-recipe) all ran
REAL_BUILT = os.environ.get("REAL_SGLANG") is not None and all(
    (REAL_ENV_DIR / f).is_file() for f in (".ready", ".ready-pd", ".ready-tools")
)
REAL_WHY_SKIPPED = "needs the real-SGLang env (`make test-real-sglang`)"


def real_git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=test", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=30,
    )


@dataclass
class RealTarget:
    name: str
    profiles: Path
    workdir: Path
    log: list[str] = field(default_factory=list)

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
        """`dsv4ops ARGS --target NAME`: (exit code, stdout + stderr), logged."""
        code = main([*args, "--target", self.name])
        out, err = capsys.readouterr()
        self.log.append(f"$ dsv4ops {' '.join(args)}  -> {code}\n{out}{err}")
        return code, out + err

    def run_json(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
        code, out = self.run(capsys, *args, "--json")
        return code, json.loads(out[out.index("{") : out.rindex("}") + 1])

    def keep_log(self, name: str) -> Path:
        """The run's commands and outputs, kept after the run beside the env."""
        out = REAL_ENV_DIR / "last-run"
        out.mkdir(exist_ok=True)
        (out / name).write_text("\n".join(self.log))
        return out / name


@contextlib.contextmanager
def real_target(tmp_path: Path, name: str, workdir_name: str) -> Iterator[RealTarget]:
    """The repo, the target and the environment variables that point dsv4ops at them; the unit
    stopped at exit whatever happened (never leave 7 GB behind)."""
    profiles = tmp_path / "repo" / "profiles"
    profiles.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "profiles" / "tiny-cpu.yaml", profiles / "tiny-cpu.yaml")
    workdir = REAL_ENV_DIR / workdir_name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    (profiles / "targets.yaml").write_text(f"""schema_version: 1
targets:
  {name}:
    transport: local
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    workdir: {workdir}
    python: {REAL_ENV_DIR / 'venv' / 'bin' / 'python'}
    launcher: sglang
    bind_host: 127.0.0.1
    connect_host: 127.0.0.1
    port_offset: {pick_offset()}
  {name}-twin:
    description: the twin with the same profile, for the verdicts side by side
    transport: local
    gpus: [0, 1, 2, 3, 4, 5, 6, 7]
    workdir: {tmp_path / "twin-work"}
    python: null
    launcher: twin
    bind_host: 127.0.0.1
    connect_host: 127.0.0.1
    port_offset: {pick_offset()}
    twin_env: {{DSV4_TWIN_MODEL_LOAD_S: "5", DSV4_TWIN_WARMUP_S: "2"}}
""")
    real_git(profiles.parent, "init", "-q")
    real_git(profiles.parent, "add", "-A")
    real_git(profiles.parent, "commit", "-q", "-m", "tiny-cpu")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
        mp.setenv("DSV4OPS_STATE_DIR", str(tmp_path / "state"))
        try:
            yield RealTarget(name, profiles, workdir)
        finally:
            main(["stop", "--target", name, "--yes", "--recover"])
            main(["stop", "--target", f"{name}-twin", "--yes", "--recover"])


def scheduler_of(pid: int) -> int:
    """The scheduler process under a server's process tree (SGLang names it by setproctitle,
    `sglang::scheduler...`): the process that runs the batches, whose stop is a real wedge."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree, grew = {pid}, True
    while grew:
        kids = {p for p, pp in parents.items() if pp in tree} - tree
        tree |= kids
        grew = bool(kids)
    for p in sorted(tree):
        with contextlib.suppress(OSError):
            text = (Path("/proc") / str(p) / "cmdline").read_bytes().replace(b"\0", b" ")
            if b"scheduler" in text:
                return p
    raise AssertionError(f"no scheduler process under pid {pid}")
