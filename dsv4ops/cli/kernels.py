"""`dsv4ops kernels build|verify|deploy|list|rollback`: the tuned decode-kernel package pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from dsv4ops.cli._output import echo_json, json_option, target_option
from dsv4ops.errors import DsOpsError


@click.group("kernels")
def kernels() -> None:
    """Build, verify, deploy and roll back tuned kernel packages (docs/kernels.md)."""


def _runtime(target: Any) -> Any:
    from dsv4ops.kernels.deploy import twin_runtime

    if target.launcher == "twin":
        return twin_runtime(dict(target.twin_env))
    return None  # probed on the target by the caller, through its executor


def _open(target_name: str | None) -> tuple[Any, Any]:
    from dsv4ops.cli._context import open_target
    from dsv4ops.kernels.deploy import probe_runtime

    ctx = open_target(target_name)
    runtime = _runtime(ctx.target) or probe_runtime(ctx.supervisor)
    return ctx, runtime


@contextmanager
def _deploy_lock(ctx: Any, command: str, op_id: str | None = None) -> Iterator[None]:
    """Hold the target's deploy lock: a kernel switch must not race a PD deploy or rollback."""
    from dsv4ops.remote import lock_holder

    holder = lock_holder(command, op_id)
    ctx.supervisor.lock_acquire(holder)
    try:
        yield
    finally:
        ctx.supervisor.lock_release(holder["op_id"])


@contextmanager
def _journaled(ctx: Any, asked: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Journal one `kernels deploy|rollback` under the deploy lock: who and when (begin), what was
    asked, and the outcome with the package it left current. The caller fills the yielded dict
    with the result (package, previous, config_dir); an error is recorded FAILED and re-raised."""
    from dsv4ops.journal.records import Kind, Status

    journal = ctx.journal
    op_id = journal.new_op_id(Kind.KERNELS)
    result: dict[str, Any] = {}
    with _deploy_lock(ctx, f"dsv4ops kernels {asked['action']}", op_id):
        # Begun only once the lock is held: a refusal by the lock changed nothing, like deploy's.
        journal.begin(Kind.KERNELS, op_id=op_id, kernel=asked)
        journal.transition(op_id, Status.RUNNING)
        try:
            yield result
        except Exception as exc:
            journal.transition(op_id, Status.FAILED, message=str(exc).splitlines()[0][:500])
            raise
        journal.transition(
            op_id,
            Status.SUCCEEDED,
            message=f"{asked['action']}: {result.get('package')} is current "
            f"(previous: {result.get('previous') or 'none'})",
            kernel=result,
        )


def _outcome(result: dict[str, Any]) -> dict[str, Any]:
    """What the journal keeps of a switch: the package now current, the one before, its dir."""
    return {
        "package": f"{result.get('name')}@{result.get('version')}",
        "previous": result.get("previous"),
        "config_dir": result.get("config_dir"),
    }


@kernels.command("build")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("dist"),
              show_default=True, help="Directory for the artifact.")
@click.option("--version", "version", default=None, help="Package version (default: content-hashed).")
@click.option("--no-interpreter-check", is_flag=True, help="Skip the CPU interpreter correctness run.")
@json_option
def build_cmd(out_dir: Path, version: str | None, no_interpreter_check: bool, as_json: bool) -> None:
    """Check every config (sm_120 compile, interpreter) and write a versioned artifact."""
    from dsv4ops.kernels.build import build
    from dsv4ops.remote import LocalExecutor

    # Checked before the (slow) compile checks, so a bad --out fails at once with one line
    # instead of a traceback after minutes of work.
    _writable_dir(out_dir)
    try:
        result = build(executor=LocalExecutor(), out_dir=out_dir, version=version,
                       interpreter=not no_interpreter_check)
    except OSError as exc:
        raise DsOpsError(f"cannot write the artifact under {out_dir}: {exc.strerror or exc}") from None
    if as_json:
        echo_json({"path": str(result.path), "sha256": result.sha256, "name": result.manifest.name,
                   "version": result.manifest.version, "config_keys": list(result.manifest.config_keys)})
        return
    click.echo(f"built {result.path}  sha256 {result.sha256}")
    click.echo(f"  {result.manifest.ref}: {len(result.manifest.files)} files, "
               f"{len(result.manifest.config_keys)} config keys, target {result.manifest.arch}/triton {result.manifest.triton}")


def _writable_dir(path: Path) -> None:
    """Create `path` (and parents) and check it takes files; DsOpsError (exit 1) otherwise."""
    import os

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DsOpsError(
            f"--out {path}: cannot create the output directory: {exc.strerror or exc}"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise DsOpsError(f"--out {path}: the output directory is not writable")


@kernels.command("verify")
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@target_option
@json_option
def verify_cmd(artifact: Path, target: str | None, as_json: bool) -> None:
    """Check an artifact's checksums and archive rules, and that TARGET can run it."""
    from dsv4ops.kernels.deploy import verify

    ctx, runtime = _open(target)
    try:
        result = verify(artifact, runtime)
    finally:
        ctx.close()
    if as_json:
        echo_json({"ok": True, "package": result.manifest.ref, "target": ctx.target.name,
                   "runtime": runtime.__dict__})
        return
    click.echo(f"ok: {result.manifest.ref} ({len(result.files)} files verified) fits {ctx.target.name} "
               f"({runtime.arch}, triton {runtime.triton}; {runtime.source})")


@kernels.command("deploy")
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@target_option
@json_option
def deploy_cmd(artifact: Path, target: str | None, as_json: bool) -> None:
    """Copy, verify on the target, switch atomically; the previous version stays for rollback."""
    from dsv4ops.kernels.deploy import deploy

    ctx, runtime = _open(target)
    try:
        with _journaled(ctx, {"action": "deploy", "artifact": artifact.name}) as record:
            result = deploy(ctx.supervisor.executor, ctx.target.workdir, ctx.target.python, artifact, runtime)
            record.update(_outcome(result))
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    click.echo(f"deployed {result['name']}@{result['version']} to {ctx.target.name} "
               f"(previous: {result['previous'] or 'none'})")
    click.echo(f"  SGLANG_MOE_CONFIG_DIR={result['config_dir']}")
    # SGLang reads the config dir once at start, and a deploy loads the version the profile pins:
    # the way to run this version is the whole unit, never a decode restart on its own (that
    # breaks KV transfer against a long-running prefill).
    click.echo(f"  to run it: pin `kernel_package: {result['name']}@{result['version']}` in the profile "
               f"and `dsv4ops deploy PROFILE --target {ctx.target.name}`")


@kernels.command("list")
@target_option
@json_option
def list_cmd(target: str | None, as_json: bool) -> None:
    """Installed packages on the target, the current and previous version of each."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.cli._output import table
    from dsv4ops.kernels.deploy import list_packages

    ctx = open_target(target)
    try:
        result = list_packages(ctx.supervisor.executor, ctx.target.workdir, ctx.target.python)
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    rows = [(name, p["current"] or "-", p["previous"] or "-", " ".join(p["versions"]))
            for name, p in result["packages"].items()]
    click.echo(table(rows, ["package", "current", "previous", "installed"]) if rows else "no kernel packages")


@kernels.command("rollback")
@click.option("--name", default="dsv4-decode-kernels", show_default=True, help="Package name.")
@click.option("--to", "to", default=None, help="Version to switch to (default: the previous one).")
@target_option
@json_option
def rollback_cmd(name: str, to: str | None, target: str | None, as_json: bool) -> None:
    """Switch the package back to its previous (or a named) installed version."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.kernels.deploy import rollback

    ctx = open_target(target)
    try:
        with _journaled(ctx, {"action": "rollback", "name": name, "to": to}) as record:
            result = rollback(ctx.supervisor.executor, ctx.target.workdir, ctx.target.python, name, to)
            record.update(_outcome(result))
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    click.echo(f"{name}: current is now {result['version']} (SGLANG_MOE_CONFIG_DIR={result['config_dir']})")
