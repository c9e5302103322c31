"""Test/demo/benchmark environment for deploy/status/rollback on the twin with the real router.

`make_env(root)` builds, under `root`:
  * a git repository holding the shipped profiles plus fault-injection variants (committed, so
    rollback reads them from git at a commit, as in production);
  * targets.yaml with a local twin target on free high ports (a port offset), fast twin start-up
    and a shared twin event log;
  * the work directory the components run in (their cwd, which is how orphans are found).

`our_processes(env)` lists live processes whose cwd is that work directory; `kill_all(env)` is the
teardown safety net (SIGKILL every recorded process group and every such process).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SHIPPED_PROFILES = Path(__file__).resolve().parent.parent / "profiles"
BASE_PORTS = (30000, 30001, 8998, 8000, 29000)
FAST_TWIN_ENV = {
    "DSV4_TWIN_MODEL_LOAD_S": "0.2",
    "DSV4_TWIN_CAPTURE_S_PER_BUCKET": "0.005",
    "DSV4_TWIN_WARMUP_S": "0.2",
    "DSV4_TWIN_TIME_SCALE": "0.05",
    # and the SIGTERM path, as testing/twin_stack.py's FAST_ENV: SGLang's watchdog tick (5 s) and
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


def _ports_free(ports: list[int]) -> bool:
    for p in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def pick_offset(rng: random.Random | None = None) -> int:
    """A port offset that puts all five profile ports on free ports (below the ephemeral range)."""
    rng = rng or random.Random()
    for _ in range(200):
        offset = rng.randrange(1000, 2300)  # 30000+offset stays below 32768 (ephemeral range)
        if _ports_free([p + offset for p in BASE_PORTS]):
            return offset
    raise RuntimeError("no free port offset found")


def _git(args: list[str], cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def make_env(
    root: Path, *, target: str = "twin-test", extra_twin_env: dict[str, str] | None = None
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
    python: {sys.executable}
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
    run_dir = env.workdir / "run"
    if run_dir.is_dir():
        for rec in run_dir.glob("*.json"):
            if rec.name.endswith(".exit.json"):
                continue
            with contextlib.suppress(ValueError, OSError):
                pgid = json.loads(rec.read_text()).get("pgid")
                if pgid:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pgid, signal.SIGKILL)
    for pid in our_processes(env):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def read_events(env: OrchEnv) -> list[dict[str, object]]:
    try:
        return [json.loads(line) for line in env.event_log.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []
