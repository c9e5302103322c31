"""Composition root for the orchestration verbs: target name -> executor, supervisor, journal.

Also the glue that needs more than one lower layer: rendering a profile (profiles) into the
Deployment value with its git commit, rebuilding one at a recorded commit for rollback,
and the canary step (canary) the deploy runs after the end-to-end probe.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.engine import CanaryStep, Timeouts
from dsv4ops.orchestrate.kernelpkg import KernelSupport, config_dir_env
from dsv4ops.orchestrate.ops import Operator


@dataclass
class TargetContext:
    target: Any  # profiles.Target
    supervisor: Any  # remote.Supervisor
    journal: Journal

    def close(self) -> None:
        self.supervisor.executor.close()


def open_target(name: str | None) -> TargetContext:
    """Connect (lazily, for SSH) to a target from profiles/targets.yaml. Raises DsOpsError."""
    from dsv4ops.profiles import get_target
    from dsv4ops.remote import Supervisor, connect

    target = get_target(name)
    if target.transport == "ssh":
        s = target.ssh
        executor = connect(
            "ssh",
            host=s.host,
            port=s.port,
            user=s.user,
            key=_expand(s.key),
            known_hosts=_expand(s.known_hosts),
            trust_on_first_use=s.trust_on_first_use,
            python=target.python,
        )
    else:
        executor = connect("local")
    supervisor = Supervisor(executor, target.workdir, python=target.python)
    return TargetContext(target, supervisor, Journal(target.name))


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def git_commit_of(profile: Any) -> str | None:
    """HEAD's sha when every file of the profile's extends chain is committed unchanged, else None."""
    from dsv4ops.profiles import git as gitio

    files = [Path(p) for p in (getattr(profile, "chain", None) or (profile.path,))]
    sha = gitio.head_sha(files[0].resolve())
    if sha is None:
        return None
    for f in files:
        try:
            if gitio.show_file(f, sha) != f.read_text(encoding="utf-8"):
                return None
        except (DsOpsError, OSError):
            return None
    return sha


def deployment_for(profile_ref: str, target: Any) -> Deployment:
    """Load the profile from the working copy and render it for the target."""
    from dsv4ops.profiles import load_profile, render

    profile = load_profile(profile_ref)
    return replace(
        render(profile, target),
        profile_path=str(Path(profile.path).resolve()),
        git_commit=git_commit_of(profile),
    )


def render_at_commit(target: Any) -> Callable[[str, str], Deployment]:
    """For rollback: read the profile file (and its chain) at a commit, render it for target."""
    from dsv4ops.profiles import load_profile, render

    def build(path: str, commit: str) -> Deployment:
        profile = load_profile(path, git_rev=commit)
        return replace(render(profile, target), profile_path=path, git_commit=commit)

    return build


def render_now(target: Any) -> Callable[[str], Deployment]:
    """For drift: the named profile as the working copy renders it now."""
    return lambda name: deployment_for(name, target)


READY_TIMEOUT_ENV = "DSV4OPS_READY_TIMEOUT_S"


def timeouts_for(target: Any) -> Timeouts:
    """Readiness limits: minutes on the real box (weights load), 2 min on the twin.

    Raises DsOpsError (exit 1, one line) when DSV4OPS_READY_TIMEOUT_S is not a positive number:
    a typo there must not become a traceback, nor silently the defaults.
    """
    override = os.environ.get(READY_TIMEOUT_ENV)
    if override:
        try:
            s = float(override)
        except ValueError:
            s = -1.0
        if not (math.isfinite(s) and s > 0):
            raise DsOpsError(
                f"{READY_TIMEOUT_ENV}={override!r} is not a positive number of seconds",
                hint=f"unset it or set e.g. {READY_TIMEOUT_ENV}=60",
            )
        return Timeouts(
            ready_s={"prefill": s, "decode": s, "router": s},
            stop_grace_s=min(30.0, s),
            drain_s=min(60.0, s),
            probe_request_s=min(60.0, s),
        )
    if target.launcher == "twin":
        return Timeouts(
            ready_s={"prefill": 120.0, "decode": 120.0, "router": 60.0},
            stop_grace_s=10.0,
            drain_s=15.0,
            probe_request_s=30.0,
        )
    return Timeouts()


def canary_step(
    previous_flags: dict[str, Any] | None, *, duration_s: float, progress: Callable[[str], None]
) -> CanaryStep:
    """The deploy's canary: smoke plus the suites the flag change calls for (canary helper).

    The canary is part of the package: if it cannot be imported the deploy must fail loudly, not
    mark a deployment known-good without its canary (the import error surfaces as a crash).
    """
    from dsv4ops.canary import run_suite, suites_for_change, thresholds_from_profile

    def step(deployment: Deployment, _router_url: str) -> tuple[str, list[str]]:
        base = deployment.component("router").client_url()  # the canary runs on this machine
        workers = [c.client_url() for c in deployment.in_order(("prefill", "decode"))]
        thresholds = thresholds_from_profile(deployment.canary_settings)
        flags = dict(deployment.flags)
        flags.setdefault("kernel_package", deployment.kernel_package)
        suites = suites_for_change(previous_flags, flags)
        reasons: list[str] = []
        verdict = "PASS"
        for suite in suites:
            progress(f"    canary suite {suite}")
            result = run_suite(
                suite,
                base,
                worker_urls=workers,
                thresholds=thresholds,
                buckets=deployment.decode_buckets,
                duration_s=None if suite == "smoke" else duration_s,
                model=deployment.model_name,
            )
            # The suite's own verdict first, so the journal records which suites ran and how.
            reasons.append(f"{suite}: {result.verdict.value}")
            reasons += [f"{suite}: {r}" for r in result.reasons if not r.startswith("note")]
            # FAIL ends the canary (the deploy rolls back). INCONCLUSIVE does not: a later suite
            # may still FAIL (e.g. a smoke the busy client could not judge, then a corruption
            # suite that catches corrupted tool calls), and FAIL must win over INCONCLUSIVE.
            if result.verdict.value == "FAIL":
                return "FAIL", reasons
            if result.verdict.value != "PASS":
                verdict = result.verdict.value
        return verdict, reasons

    return step


def kernel_support(ctx: TargetContext) -> KernelSupport:
    """The kernels pipeline's checks, bound to this target, for the deploy path (kernelpkg.py)."""
    from dsv4ops import kernels as K

    sup, workdir = ctx.supervisor, ctx.target.workdir

    def loaded(server_info: str, log_tail: str, expected: str) -> tuple[bool, str]:
        check = K.loaded_check(server_info, log_tail, expected=expected)
        return check.used, check.reason

    return KernelSupport(
        present=lambda ref: K.package_present(sup, workdir, ref),
        env_for=lambda ref: config_dir_env(sup.read_state("kernels"), workdir, ref),
        loaded=loaded,
    )


def operator_for(
    ctx: TargetContext,
    *,
    progress: Callable[[str], None],
    canary: CanaryStep | None,
    model: str,
    command: str,
    accept_inconclusive: bool = False,
) -> Operator:
    host = ctx.target.ssh.host if ctx.target.ssh else "localhost"
    return Operator(
        ctx.supervisor,
        ctx.journal,
        host=f"{ctx.target.name} ({host})",
        progress=progress,
        timeouts=timeouts_for(ctx.target),
        canary=canary,
        model=model,
        command=command,
        accept_inconclusive=accept_inconclusive,
        kernels=kernel_support(ctx),
    )


def raise_for(out: Any) -> None:
    """A handled failure exits 2 with its message; an interrupted operation exits 130 (its
    message says what was done and what runs now, rolled back or not)."""
    from dsv4ops.errors import DeployError
    from dsv4ops.orchestrate.interrupts import DeployInterrupted

    if getattr(out, "interrupted", False):
        raise DeployInterrupted(out.message)
    if not out.ok:
        raise DeployError(out.message)


def progress_printer(as_json: bool) -> Callable[[str], None]:
    """Progress lines go to stdout, or to stderr when stdout carries --json."""
    return lambda line: click.echo(line, err=as_json)
