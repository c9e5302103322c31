"""`dsv4ops kernels build|verify|deploy|list|rollback`: the tuned decode-kernel package pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import (
    NAMED,
    dry_run_option,
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    target_option,
    yes_option,
)
from dsv4ops.errors import DsOpsError

if TYPE_CHECKING:
    from dsv4ops.usecases.kernels import TargetRuntime
    from dsv4ops.usecases.session import TargetSession


@click.group("kernels")
def kernels() -> None:
    """Build, verify, deploy and roll back tuned kernel packages (docs/kernels.md)."""


def _open(target_name: str | None, verb: str) -> tuple[TargetSession, TargetRuntime]:
    """(session, the target's runtime: arch and triton) for verify and deploy."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.kernels import target_runtime

    session = open_target(target_name, verb=verb)
    try:
        return session, target_runtime(session)
    except BaseException:
        session.close()
        raise


_recover_option = click.option(
    "--recover", is_flag=True, help="Resolve an interrupted operation (stale lock) first."
)


@kernels.command("build")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("dist"),
    show_default=True,
    help="Directory for the artifact.",
)
@click.option(
    "--version", "version", default=None, help="Package version (default: content-hashed)."
)
@click.option(
    "--no-interpreter-check", is_flag=True, help="Skip the CPU interpreter correctness run."
)
@json_option
def build_cmd(
    out_dir: Path, version: str | None, no_interpreter_check: bool, as_json: bool
) -> None:
    """Check every config (sm_120 compile, interpreter) and write a versioned artifact."""
    from dsv4ops.cli._live import LiveWaits
    from dsv4ops.usecases.kernels import build_package

    # Checked before the (slow) compile checks, so a bad --out fails at once with one line
    # instead of a traceback after minutes of work.
    _writable_dir(out_dir)
    try:
        result = build_package(
            out_dir,
            version=version,
            interpreter=not no_interpreter_check,
            waits=LiveWaits(plain=as_json),
        )
    except OSError as exc:
        raise DsOpsError(
            f"cannot write the artifact under {out_dir}: {exc.strerror or exc}"
        ) from None
    if as_json:
        echo_json(
            {
                "path": str(result.path),
                "sha256": result.sha256,
                "name": result.manifest.name,
                "version": result.manifest.version,
                "config_keys": list(result.manifest.config_keys),
            }
        )
        return
    click.echo(f"built {result.path}  sha256 {result.sha256}")
    click.echo(
        f"  {result.manifest.ref}: {len(result.manifest.files)} files, "
        f"{len(result.manifest.config_keys)} config keys, target {result.manifest.arch}/triton {result.manifest.triton}"
    )


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
    from dsv4ops.usecases.kernels import verify_package

    ctx, runtime = _open(target, "kernels verify")
    try:
        result = verify_package(artifact, runtime)
    finally:
        ctx.close()
    if as_json:
        echo_json(
            {
                "ok": True,
                "package": result.manifest.ref,
                "target": ctx.target.name,
                "runtime": runtime.__dict__,
            }
        )
        return
    # What the target reported about its runtime: terminal-safe.
    echo_lines(
        [
            f"ok: {result.manifest.ref} ({len(result.files)} files verified) fits "
            f"{ctx.target.name} ({runtime.arch}, triton {runtime.triton}; {runtime.source})"
        ]
    )


@kernels.command("deploy")
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@target_option
@json_option
@_recover_option
@yes_option
@reason_option
@dry_run_option
def deploy_cmd(
    artifact: Path,
    target: str | None,
    as_json: bool,
    recover: bool,
    yes: bool,
    reason: str | None,
    dry_run: bool,
) -> None:
    """Copy, verify on the target, switch atomically; the previous version stays for rollback."""
    from dsv4ops.cli._context import progress_printer
    from dsv4ops.usecases.kernels import deploy_package

    ctx, runtime = _open(target, "kernels deploy")
    try:
        if dry_run or not yes:
            what = f"install {artifact.name} on {ctx.target.name} and make it current"
            if dry_run:
                _print_dry_run(
                    as_json,
                    {
                        "dry_run": True,
                        "action": "deploy",
                        "artifact": str(artifact),
                        "target": ctx.target.name,
                    },
                    what,
                )
                return
            click.confirm(f"{what}?", abort=True)
        result = deploy_package(
            ctx,
            artifact,
            runtime,
            progress=progress_printer(as_json),
            recover=recover,
            reason=reason,
        )
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    # The names, versions and directory are the target's answer: printed terminal-safe.
    echo_lines(
        [
            f"deployed {result['name']}@{result['version']} to {ctx.target.name} "
            f"(previous: {result['previous'] or 'none'})",
            f"  SGLANG_MOE_CONFIG_DIR={result['config_dir']}",
            # SGLang reads the config dir once at start, and a deploy loads the version the
            # profile pins: the way to run this version is the whole unit, never a decode
            # restart on its own (that breaks KV transfer against a long-running prefill).
            f"  to run it: pin `kernel_package: {result['name']}@{result['version']}` in the "
            f"profile and `dsv4ops deploy PROFILE --target {ctx.target.name}`",
            # Only one DSV4 MoE path reads the package's configs (docs/kernels.md); validate
            # enforces it.
            "  it is read only with decode.env SGLANG_DSV4_FP4_DEQUANT=1 and "
            "SGLANG_ENABLE_JIT_DEEPGEMM=0 (--moe-runner-backend auto)",
        ]
    )


def _print_dry_run(as_json: bool, doc: Mapping[str, object], what: str) -> None:
    if as_json:
        echo_json(doc)
    else:
        click.echo(f"plan: {what} (dry run: nothing is changed)")


@kernels.command("list")
@target_option
@json_option
def list_cmd(target: str | None, as_json: bool) -> None:
    """Installed packages on the target, the current and previous version of each."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.cli._output import table
    from dsv4ops.usecases.kernels import installed_packages

    ctx = open_target(target, verb="kernels list")
    try:
        result = installed_packages(ctx)
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    rows = [
        (name, p["current"] or "-", p["previous"] or "-", " ".join(p["versions"]))
        for name, p in result["packages"].items()
    ]
    click.echo(
        table(rows, ["package", "current", "previous", "installed"])
        if rows
        else "no kernel packages"
    )


@kernels.command("rollback")
@click.option(
    "--name", type=NAMED, default="dsv4-decode-kernels", show_default=True, help="Package name."
)
@click.option(
    "--to", "to", type=NAMED, default=None, help="Version to switch to (default: the previous one)."
)
@target_option
@json_option
@_recover_option
@yes_option
@reason_option
@dry_run_option
def rollback_cmd(
    name: str,
    to: str | None,
    target: str | None,
    as_json: bool,
    recover: bool,
    yes: bool,
    reason: str | None,
    dry_run: bool,
) -> None:
    """Switch the package back to its previous (or a named) installed version."""
    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases.kernels import rollback_choice, rollback_package

    ctx = open_target(target, verb="kernels rollback")
    try:
        if dry_run or not yes:
            # the versions, read from the target: a plan or a question about "its previous
            # version" when there is none was answered only by the refusal after the yes
            current, version = rollback_choice(ctx, name, to)
            what = f"switch {name} on {ctx.target.name} from {current or '-'} back to {version}"
            if dry_run:
                _print_dry_run(
                    as_json,
                    {
                        "dry_run": True,
                        "action": "rollback",
                        "name": name,
                        "to": version,
                        "current": current,
                        "target": ctx.target.name,
                    },
                    what,
                )
                return
            click.confirm(f"{what}?", abort=True)
        result = rollback_package(
            ctx, name, to, progress=progress_printer(as_json), recover=recover, reason=reason
        )
    finally:
        ctx.close()
    if as_json:
        echo_json(result)
        return
    echo_lines(  # the target's answer: terminal-safe
        [
            f"{name}: current is now {result['version']} (SGLANG_MOE_CONFIG_DIR={result['config_dir']})"
        ]
    )
