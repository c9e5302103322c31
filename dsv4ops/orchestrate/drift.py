"""Drift: differences between what runs, what the journal says was deployed, and the profile now.

Pure functions over plain data, so every rule is unit-tested without processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dsv4ops.deployment import START_ORDER, Component, Deployment
from dsv4ops.journal.commands import command
from dsv4ops.remote.base import ProcessState, redact_argv, redact_env
from dsv4ops.sglang_paths import CONFIG_DIR_ENV, PLUGINS_ENV


def process_drift(
    states: Mapping[str, ProcessState],
    deployed: Deployment | None,
    recorded_processes: Mapping[str, Mapping[str, object]],
    started_by: Mapping[str, tuple[int | None, str]] | None = None,
) -> list[str]:
    """Sentences about running processes that differ from the recorded deployment.

    `started_by` maps a component to (pid, "deploy d-… of P, which …") for the operations the
    journal shows starting it after the recorded deployment (an interrupted one): a process
    they started is named as theirs, not as "restarted outside dsv4ops".
    """
    out: list[str] = []
    by = started_by or {}

    def ours(name: str, state: ProcessState) -> str | None:
        pid, who = by.get(name, (None, ""))
        return who if pid is not None and pid == state.pid else None

    if deployed is None:
        strays = [n for n in START_ORDER if n in states and states[n].alive]
        left = [n for n in strays if ours(n, states[n])]
        for n in left:
            out.append(f"{n} (pid {states[n].pid}) was left running by {ours(n, states[n])}")
        others = [n for n in strays if n not in left]
        if others:
            out.append(
                f"{', '.join(others)} running but the journal records no current deployment "
                "(started outside dsv4ops, or left by an interrupted operation)"
            )
        return out
    for name in START_ORDER:
        state = states.get(name)
        if state is None or not state.alive:
            code = (
                f" (exit code {state.exit_code})"
                if state is not None and state.exit_code is not None
                else ""
            )
            out.append(f"{name} is not running{code}, but {deployed.profile_name} is deployed")
            continue
        rec = recorded_processes.get(name) or {}
        if rec and (rec.get("pid") != state.pid or rec.get("started_at") != state.started_at):
            if ours(name, state):
                out.append(
                    f"{name} (pid {state.pid}) was started by {ours(name, state)}; it is not "
                    f"the deployed {deployed.profile_name}'s {name} (pid {rec.get('pid')})"
                )
                continue
            out.append(
                f"{name} was restarted outside dsv4ops: deployed as pid {rec.get('pid')} "
                f"(started {rec.get('started_at')}), now pid {state.pid} (started {state.started_at})"
            )
        spec = deployed.component(name)
        if state.argv is not None and list(state.argv) != redact_argv(spec.argv):
            out.append(
                f"{name} runs a different command than deployed: {_argv_diff(spec.argv, state.argv)}"
            )
        if state.env is not None and dict(state.env) != redact_env(spec.env):
            keys = sorted(
                set(state.env) ^ set(spec.env)
                | {
                    k
                    for k in set(state.env) & set(spec.env)
                    if state.env[k] != redact_env(spec.env)[k]
                }
            )
            out.append(
                f"{name} runs with a different environment than deployed (keys: {', '.join(keys)})"
            )
    return out


def restart_drift(
    states: Mapping[str, ProcessState], deployed: Deployment | None, target: str
) -> list[str]:
    """With a component of the deployment not running (process_drift says which), the command
    that restarts the unit on `target`. One component alone is never restarted: against a
    running prefill a new decode breaks KV transfer (docs/deploy.md, the PD pair rule); a
    deploy of the deployed profile restarts all three."""
    if deployed is None or not any(_down(states.get(n)) for n in START_ORDER):
        return []
    return [
        f"to restart it: {command('deploy', target, deployed.profile_name)} restarts "
        "prefill, decode and router together"
    ]


def _down(state: ProcessState | None) -> bool:
    return state is None or not state.alive


def profile_drift(
    deployed: Deployment, rendered_now: Deployment | None, why_not: str | None = None
) -> list[str]:
    """Sentences when the deployed profile, rendered from the working copy now, differs."""
    if rendered_now is None:
        return (
            [f"cannot render {deployed.profile_name} from the working copy to compare ({why_not})"]
            if why_not
            else []
        )
    if rendered_now.commands_hash == deployed.commands_hash:
        return []
    changed = [
        n
        for n in START_ORDER
        if rendered_now.component(n).argv != deployed.component(n).argv
        or _env_differs(rendered_now.component(n), deployed.component(n), deployed.kernel_package)
    ]
    # Only the commands are evidence: the hash also differs when only redacted secrets do (it
    # covers values never recorded), or when it was computed from a record without one whose
    # key reference status could not read (a damaged `key_from`).
    if not changed:
        return []
    return [
        f"profile {deployed.profile_name} in the working copy now renders different commands for "
        f"{', '.join(changed)} than what is deployed (commit {(deployed.git_commit or 'uncommitted')[:12]}); "
        "redeploy to apply, or `dsv4ops profile diff` to see the change"
    ]


@dataclass(frozen=True)
class KernelReading:
    """One side of the kernel-package comparison: the package active on the target, or the one
    the running decode loaded. `package` is "name@version", or None for none; `known` is False
    when it cannot be told (then nothing is claimed about it); `detail` says how or why."""

    package: str | None
    known: bool = True
    detail: str = ""

    def text(self) -> str:
        if not self.known:
            return f"unknown ({self.detail})" if self.detail else "unknown"
        if self.package is None:
            return f"none ({self.detail})" if self.detail else "none"
        return self.package

    def differs(self, ref: str) -> bool:
        """Known, and not `ref`."""
        return self.known and self.package != ref


def kernel_package_drift(
    profile_name: str,
    deployed: str | None,
    active: KernelReading,
    loaded: KernelReading,
    *,
    target: str,
) -> list[str]:
    """One sentence when the kernel package the deployment pinned (`deployed`, "name@version"),
    the one active on the target (the `kernels` deploy's current pointer) and the one the
    running decode loaded are not all the same; what cannot be known is shown, never counted.

    The remedies are the tool's own: a deploy restarts the PD unit together and loads the
    *pinned* version (kernelpkg.config_dir_env), whatever is current; `kernels rollback --to`
    moves the pointer. Restarting decode alone is never suggested: against a long-running
    prefill it breaks KV transfer (docs/deploy.md, the PD pair rule).
    """
    if not deployed:
        return []  # the profile names no package: the workers use what its own env says
    active_off, loaded_off = active.differs(deployed), loaded.differs(deployed)
    if not (active_off or loaded_off):
        return []
    name, _, version = deployed.partition("@")
    deploy = command("deploy", target, profile_name)
    back = command("kernels rollback", target, "--name", name, "--to", version)
    fixes = []
    if loaded_off:
        fixes.append(
            f"restart the unit with {deploy} (prefill, decode and router together) to load "
            f"{deployed}, which the profile pins"
            + (f", after {back} makes it active on the target again" if active_off else "")
        )
    elif active_off:
        fixes.append(f"{back} makes the running {deployed} active on the target again")
    if active_off and active.package:
        fixes.append(
            f"or, to serve {active.package}, set `kernel_package: {active.package}` in profile "
            f"{profile_name} and run {deploy} (it restarts the unit)"
        )
    return [
        f"kernel package: deployed {deployed}, active on target {active.text()}, decode loaded "
        f"{loaded.text()} — {'; '.join(fixes)}. Never restart decode alone: against the "
        "running prefill it breaks KV transfer"
    ]


def _env_differs(now: Component, deployed: Component, kernel_package: str | None) -> bool:
    """Env comparison that expects the kernel package's env the deploy added itself
    (orchestrate/kernelpkg.py: config dir, plugin name, its site on PYTHONPATH), which the
    profile does not render."""
    want, got = dict(now.env), dict(deployed.env)
    for key in (CONFIG_DIR_ENV, PLUGINS_ENV, "PYTHONPATH"):
        if kernel_package and key not in want:
            got.pop(key, None)
    return want != got


def _argv_diff(want: tuple[str, ...], got: tuple[str, ...]) -> str:
    want_r, got_r = redact_argv(want), list(got)
    extra = [a for a in got_r if a not in want_r]
    missing = [a for a in want_r if a not in got_r]
    parts = []
    if missing:
        parts.append("missing " + " ".join(missing[:6]))
    if extra:
        parts.append("extra " + " ".join(extra[:6]))
    return "; ".join(parts) or "same arguments in a different order"
