"""`kernels build|verify|list`: the package built here, checked against a target's runtime, the
target's installed packages listed; `kernels deploy|rollback`: switch the target's tuned-kernel
package as a journaled operation.

The switch takes the same deploy lock as a PD deploy, through the same operation context
(operation.py): it must not race a deploy or rollback, a dead holder's lock is resolved the same
way, and an interrupted operation the journal shows never ended blocks it until `--recover`.
It is journaled as its own kind (KERNELS): begun once the lock is held (a refusal by the lock
changed nothing), then SUCCEEDED with the package it left current, or FAILED with why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from dsv4ops.journal.records import Kind, Status
from dsv4ops.jsontypes import JSONObject
from dsv4ops.orchestrate.engine import Progress
from dsv4ops.orchestrate.interrupts import signal_name_of
from dsv4ops.orchestrate.operation import journaled_operation
from dsv4ops.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.kernels.build import BuildResult
    from dsv4ops.kernels.deploy import Artifact
    from dsv4ops.kernels.manifest import TargetRuntime as TargetRuntime  # cli/kernels.py's too
    from dsv4ops.waits import WaitObserver


def build_package(
    out_dir: Path, *, version: str | None, interpreter: bool, waits: WaitObserver
) -> BuildResult:
    """Check every config (sm_120 compile, the CPU interpreter unless not `interpreter`) on this
    machine and write a versioned artifact under `out_dir`. KernelPackageError when a check
    fails; OSError when the artifact cannot be written."""
    from dsv4ops.kernels.build import build
    from dsv4ops.remote import LocalExecutor

    return build(
        executor=LocalExecutor(),
        out_dir=out_dir,
        version=version,
        interpreter=interpreter,
        waits=waits,
    )


def verify_package(artifact: Path, runtime: TargetRuntime) -> Artifact:
    """The artifact's checksums and archive rules, and that `runtime` can run it."""
    from dsv4ops.kernels.deploy import verify

    return verify(artifact, runtime)


def installed_packages(session: TargetSession) -> JSONObject:
    """The packages installed on the session's target, the current and previous of each."""
    from dsv4ops.kernels.deploy import list_packages

    t = session.target
    return list_packages(session.supervisor.executor, t.workdir, t.python)


def rollback_choice(session: TargetSession, name: str, to: str | None) -> tuple[str | None, str]:
    """(the current version, the one a rollback would switch to), read from the target, so the
    question and the dry run name them. DsOpsError when there is none to switch to (no
    previous version, or `to` not installed): what the rollback itself would refuse, said
    before asking. The rollback re-checks on the target (another operator may act between)."""
    from dsv4ops.errors import DsOpsError

    packages = installed_packages(session).get("packages") or {}
    entry = packages.get(name) if isinstance(packages, dict) else None
    where = session.target.name
    if not isinstance(entry, dict):
        raise DsOpsError(
            f"{name}: not installed on {where}; nothing to roll back",
            hint=f"`dsv4ops kernels list --target {where}` shows what is installed",
        )
    current, previous = entry.get("current"), entry.get("previous")
    version = to or previous
    if not version:
        raise DsOpsError(
            f"{name}: no previous version to roll back to on {where} (current: {current or '-'})",
            hint=f"name one with --to (`dsv4ops kernels list --target {where}` lists them)",
        )
    if version not in (entry.get("versions") or []):
        raise DsOpsError(
            f"{name}: version {version} is not installed on {where}",
            hint=f"`dsv4ops kernels list --target {where}` lists the installed versions",
        )
    return (str(current) if current else None), str(version)


def target_runtime(session: TargetSession) -> TargetRuntime:
    """What the target runs (arch, triton): a twin stands in for the box, else it is probed."""
    from dsv4ops.kernels.deploy import probe_runtime, twin_runtime

    target = session.target
    if target.launcher == "twin":
        return twin_runtime(dict(target.twin_env))
    return probe_runtime(session.supervisor)


def deploy_package(
    session: TargetSession,
    artifact: Path,
    runtime: TargetRuntime,
    *,
    progress: Progress,
    recover: bool = False,
    reason: str | None = None,
) -> JSONObject:
    """Verify, upload and switch to ARTIFACT; {name, version, current, previous, config_dir}."""
    from dsv4ops.kernels.deploy import deploy

    t = session.target
    return _switch(
        session,
        {"action": "deploy", "artifact": artifact.name},
        lambda: deploy(session.supervisor.executor, t.workdir, t.python, artifact, runtime),
        progress=progress,
        recover=recover,
        reason=reason,
    )


def rollback_package(
    session: TargetSession,
    name: str,
    to: str | None,
    *,
    progress: Progress,
    recover: bool = False,
    reason: str | None = None,
) -> JSONObject:
    """Switch NAME back to its previous (or the `to`) installed version, re-verified."""
    from dsv4ops.kernels.deploy import rollback

    t = session.target
    return _switch(
        session,
        {"action": "rollback", "name": name, "to": to},
        lambda: rollback(session.supervisor.executor, t.workdir, t.python, name, to),
        progress=progress,
        recover=recover,
        reason=reason,
    )


def _switch(
    session: TargetSession,
    asked: Mapping[str, str | None],
    do: Callable[[], JSONObject],
    *,
    progress: Progress,
    recover: bool,
    reason: str | None = None,
) -> JSONObject:
    with _journaled(session, asked, progress=progress, recover=recover, reason=reason) as record:
        result = do()
        record.update(
            {
                "package": f"{result.get('name')}@{result.get('version')}",
                "previous": result.get("previous"),
                "config_dir": result.get("config_dir"),
            }
        )
    return result


@contextmanager
def _journaled(
    session: TargetSession,
    asked: Mapping[str, str | None],
    *,
    progress: Progress,
    recover: bool,
    reason: str | None = None,
) -> Iterator[dict[str, object]]:
    """The caller fills the yielded dict with what the journal keeps of the switch (package,
    previous, config_dir); an error (or a signal) is recorded FAILED and re-raised."""
    command = f"dsv4ops kernels {asked['action']}"
    with journaled_operation(
        session.supervisor,
        session.journal,
        Kind.KERNELS,
        command=command,
        recover=recover,
        progress=progress,
    ) as op:
        op.begin(kernel=dict(asked), reason=reason)
        result: dict[str, object] = {}
        try:
            op.gate.raise_held()
            yield result
        except KeyboardInterrupt as exc:
            op.finish(
                Status.FAILED,
                message=f"{asked['action']} interrupted by {signal_name_of(exc)}; the current "
                "package is what `dsv4ops kernels list` shows",
            )
            raise
        except Exception as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            op.finish(Status.FAILED, message=first[:500])
            raise
        op.finish(
            Status.SUCCEEDED,
            message=f"{asked['action']}: {result.get('package')} is current "
            f"(previous: {result.get('previous') or 'none'})",
            kernel=result,
        )
