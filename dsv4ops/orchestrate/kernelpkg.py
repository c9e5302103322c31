"""The profile's kernel package in the deploy path: preflight, the workers' env, the loaded check.

orchestrate's engine and kernels are peers (docs/architecture.md), so the engine does not import
`dsv4ops.kernels`; the use cases (`usecases/compose.kernel_support`) hand it a `KernelSupport` from
`kernels.package_present`, the target's `kernels` state and `kernels.loaded_check`. Without one
(unit tests with a scripted target), preflight falls back to checking that the package's
directory exists and the loaded check is skipped with a note.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from dsv4ops.deployment import WORKERS, Component, Deployment
from dsv4ops.sglang_paths import CONFIG_DIR_ENV, plugin_env

__all__ = ["CONFIG_DIR_ENV", "KernelSupport", "config_dir_env", "with_kernel_env"]


@dataclass(frozen=True)
class KernelSupport:
    # "name@version" -> installed on the target with every file matching its manifest?
    present: Callable[[str], bool]
    # "name@version" -> env the workers need to load it (sglang_paths.plugin_env)
    env_for: Callable[[str], Mapping[str, str]]
    # (server_info JSON, decode log tail, expected "name@version", the decode component: its argv
    # and env say which MoE path runs) -> (used, reason); used only on positive evidence
    loaded: Callable[[str, str, str, Component | None], tuple[bool, str]]


def config_dir_env(state: object, workdir: str, ref: str) -> dict[str, str]:
    """The env for `ref` from the target's `kernels` state (Supervisor.read_state("kernels")):
    SGLANG_MOE_CONFIG_DIR, SGLANG_PLUGINS (only this package's plugin loads) and PYTHONPATH (its
    installed distribution, `<package dir>/site`, where importlib.metadata finds the entry point).

    The state's env names the *current* version's directory; a profile pins a version, which may
    be installed but not current (e.g. after `kernels deploy` of a newer one), so then the pinned
    version's directory is used: the package root is `<workdir>/kernels/<name>/<version>`.
    """
    name, _, version = ref.partition("@")
    packages = state.get("packages", {}) if isinstance(state, Mapping) else {}
    entry = packages.get(name) if isinstance(packages, Mapping) else None
    if isinstance(entry, Mapping) and entry.get("current") == version and entry.get("config_dir"):
        return plugin_env(name, str(entry["config_dir"]))
    return plugin_env(name, f"{workdir.rstrip('/')}/kernels/{name}/{version}")


def with_kernel_env(deployment: Deployment, env: Mapping[str, str]) -> Deployment:
    """The deployment with `env` added to both workers (decode loads it; prefill harmlessly too).

    A value the profile sets itself wins (the operator pointed it somewhere on purpose). The
    commands hash stays the rendered profile's: the added env follows from the target's state,
    not from the profile, so rollback (which re-renders at a commit and compares hashes) and the
    working-copy drift check keep comparing profile with profile; the journal records the
    components with the env, so process drift compares what runs with exactly that.
    """
    if not env:
        return deployment
    comps = tuple(
        replace(c, env={**env, **dict(c.env)}) if c.name in WORKERS else c
        for c in deployment.components
    )
    return replace(deployment, components=comps)
