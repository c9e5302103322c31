"""The full-disk scenarios of issue 40 on real full filesystems, for tests/orchestrate/unrecorded_test.py.

    unshare -rm python orchestrate_full_disk.py ROOT

Run as root of a private user and mount namespace (`unshare -rm`): it builds a twin environment
under ROOT (testing/orchestrate.py), mounts a small tmpfs on the target's work directory and
another on the operator's state directory (only this process and its children see them), fills
them to the last byte when a scenario says so, and prints one JSON object of what each scenario
observed (exit codes, output, files left, processes). Everything it started is killed at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from dsv4ops.journal.target import AgentCaller, TargetJournal  # noqa: E402
from dsv4ops.jsontypes import JSONObject, JSONValue  # noqa: E402
from dsv4ops.remote.errors import AgentCallError  # noqa: E402
from testing.orchestrate import (  # noqa: E402
    OrchEnv,
    cli_operator,
    kill_all,
    make_env,
    our_processes,
)

CLI_TIMEOUT_S = 120


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


@contextlib.contextmanager
def full(mount: Path) -> Iterator[None]:
    """The filesystem at `mount` full to the last byte while the block runs."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with contextlib.suppress(OSError):  # ENOSPC: full
            while True:
                os.write(fd, b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0")
    finally:
        os.close(fd)
    try:
        yield
    finally:
        filler.unlink()


def cli(env: OrchEnv, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", *args, "--target", env.target],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env={**os.environ, **env.environ, "PYTHONPATH": str(REPO)},
        cwd=env.root,
    )
    return {"code": proc.returncode, "out": proc.stdout, "err": proc.stderr}


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if ".tmp." in p.name)


def upload(env: OrchEnv) -> dict[str, object]:
    """(a) The agent upload hits ENOSPC."""
    with full(env.workdir):
        run = cli(env, "deploy", "baseline", "--yes", "--no-canary")
        return {**run, "left": leftovers(env.workdir), "crash": leftovers(env.state_dir)}


class FullDiskJournal:
    """The supervisor as the target's journal sees it, whose journal appends fail as the agent's
    would on a full disk once `full` is set. A real full disk fails an append only once the
    journal's last page is used up (a page holds ~20 records), so a real fill alone would pick
    the failing record by the file's size: this makes it the next one, deterministically."""

    def __init__(self, real: AgentCaller, full: list[bool]) -> None:
        self.real, self.full = real, full
        self.executor, self.workdir = real.executor, real.workdir

    def call(self, op: str, timeout: float = 60.0, **args: JSONValue) -> JSONObject:
        if op == "journal_append" and self.full:
            raise AgentCallError(
                "localhost: journal_append: OSError: [Errno 28] No space left on device",
                kind="disk_full",  # as the real agent types an ENOSPC
            )
        return self.real.call(op, timeout, **args)


def start_decode(env: OrchEnv) -> dict[str, object]:
    """(b) The disk fills once prefill is up: the journal cannot record 'start decode'."""
    from dsv4ops.orchestrate.restore import fallback_for
    from dsv4ops.usecases import render as R

    os.environ.update(env.environ)
    stack = contextlib.ExitStack()
    filled: list[bool] = []

    def fill_after_prefill(line: str) -> None:
        if line.lstrip().startswith("ok") and "wait until prefill is ready" in line:
            stack.enter_context(full(env.workdir))
            filled.append(True)

    op, ctx = cli_operator(env, fill_after_prefill)
    backend = ctx.journal.backend
    assert isinstance(backend, TargetJournal)
    backend.agent = FullDiskJournal(backend.agent, filled)
    with stack:
        try:
            new = R.deployment_for("buckets-step4", ctx.target)
            fallback = fallback_for(ctx.journal, R.render_at_commit(ctx.target))
            out = op.deploy(new, fallback=fallback, run_canary=False)
        finally:
            ctx.close()
        seen = {"exit": out.exit_code, "status": out.status, "message": out.message}
        seen.update(notes=out.notes, running=out.running, pids=our_processes(env))
    recover = cli(env, "stop", "--recover", "--yes")
    journal = cli(env, "journal", "--json")
    return {**seen, "recover": recover, "journal": journal, "after": len(our_processes(env))}


def cache_full(env: OrchEnv) -> dict[str, object]:
    """(c) The operator's journal cache cannot be written: status reads, stop stops."""
    with full(env.state_dir):
        status = cli(env, "status")
        stop = cli(env, "stop", "--yes")
        processes = len(our_processes(env))
    journal = cli(env, "journal", "--json")
    return {"status": status, "stop": stop, "processes": processes, "journal": journal}


def target_full_stop(env: OrchEnv) -> dict[str, object]:
    """(e) The target's disk full when `stop` takes the deploy lock: FAILED, nothing changed
    (the unit keeps running for (c), whose `stop` then works with the target's space back)."""
    with full(env.workdir):
        stop = cli(env, "stop", "--yes")
        running = len(our_processes(env))
        left = leftovers(env.workdir)
    return {"stop": stop, "running": running, "left": left}


def main(root: Path) -> None:
    env = make_env(root)
    mount_tmpfs(env.workdir, "16m")
    mount_tmpfs(env.state_dir, "4m")
    seen: dict[str, object] = {}
    try:
        seen["upload"] = upload(env)
        seen["deploy"] = cli(env, "deploy", "baseline", "--yes", "--no-canary")
        seen["start_decode"] = start_decode(env)
        seen["redeploy"] = cli(env, "deploy", "baseline", "--yes", "--no-canary")
        seen["target_full_stop"] = target_full_stop(env)
        seen["cache_full"] = cache_full(env)
    finally:
        kill_all(env)
    print(json.dumps(seen))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
