"""Targets: where a profile runs (the box over SSH, or the twin on this machine), or a cluster
reached at its router's URL (`transport: endpoint`); declared in profiles/target_spec.py."""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import ValidationError

from dsv4ops._yaml import YAMLSyntaxError, load_with_lines
from dsv4ops.constants import (
    PROFILE_SCHEMA_VERSION,
    PROJECT_HINT,
    TARGETS_FILE,
    profiles_dir,
    project_dir,
)
from dsv4ops.errors import ProfileError
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.files import read_bounded
from dsv4ops.profiles.model import EndpointSpec, SSHSpec, Target
from dsv4ops.profiles.routers import smg_python
from dsv4ops.profiles.target_problems import problems
from dsv4ops.profiles.target_spec import BoxTarget, EndpointTarget, TargetsFile

DEFAULT_TARGET = "twin-local"


def targets_path() -> Path:
    return profiles_dir() / TARGETS_FILE


def load_targets(path: str | Path | None = None) -> dict[str, Target]:
    """Load every target from targets.yaml (default: profiles/targets.yaml). Raises ProfileError."""
    file = Path(path) if path is not None else targets_path()
    shown = str(file)
    try:
        text = read_bounded(file, "targets")
    except FileNotFoundError:
        raise ProfileError(
            "cannot read targets file: No such file or directory", path=shown, hint=PROJECT_HINT
        ) from None
    try:
        data, lines = load_with_lines(text)
    except YAMLSyntaxError as exc:
        raise ProfileError(f"invalid YAML: {exc}", path=shown, line=exc.line or 1) from None
    if not isinstance(data, dict):
        raise ProfileError(
            "a targets file must be a mapping with 'schema_version' and 'targets'",
            path=shown,
            line=1,
        )
    version = data.get("schema_version")
    if version != PROFILE_SCHEMA_VERSION:
        raise ProfileError(
            f"expected schema_version: {PROFILE_SCHEMA_VERSION}, got {excerpt(version)}",
            path=shown,
            line=lines.get("schema_version") or 1,
            key="schema_version",
        )
    try:
        spec = TargetsFile.model_validate(data)
    except ValidationError as exc:
        raise problems(exc, data, shown, lines) from None
    return {
        name: _endpoint(name, t) if isinstance(t, EndpointTarget) else _box(name, t)
        for name, t in spec.targets.items()
    }


def get_target(name: str | None, path: str | Path | None = None) -> Target:
    """One target by name (None → twin-local). Raises ProfileError naming the known targets."""
    targets = load_targets(path)
    wanted = name or DEFAULT_TARGET
    if wanted not in targets:
        raise ProfileError(
            f"unknown target '{wanted}'; known targets: {', '.join(sorted(targets))}",
            path=str(Path(path) if path else targets_path()),
        )
    return targets[wanted]


def builtin_box() -> Target:
    """The production box as the reference describes it: used when no targets file is around."""
    spec = {
        "description": "8-GPU box (built-in default)",
        "transport": "ssh",
        "ssh": {"host": "box"},
        "gpus": list(range(8)),
        "workdir": "/opt/dsv4ops",
        "bind_host": "0.0.0.0",
    }
    return _box("box", BoxTarget.model_validate(spec))


def _box(name: str, v: BoxTarget) -> Target:
    """The Target of a box entry: a local target's relative paths resolved, the address this
    machine calls derived."""
    # The same keys; ssh.host is set on an ssh target (BoxTarget._ssh_host).
    ssh = SSHSpec(**v.ssh.model_dump()) if v.transport == "ssh" else None
    # `launcher: twin` is allowed over SSH too: the twin is just another launcher on the target.
    # Its `python` must have dsv4ops installed; when it does not, the prefill exits at once and
    # the deploy's readiness wait reports that (orchestrate/engine.py names the missing module).
    python = v.python or (sys.executable if v.transport == "local" else "python3")
    workdir = v.workdir
    if v.transport == "local":
        # Relative local work directories are relative to the project (like the state dir), so a
        # command run from a subdirectory finds the unit a command from the root deployed.
        workdir = str((project_dir() / Path(workdir).expanduser()).absolute())
        if "/" in python and not Path(python).expanduser().is_absolute():
            # So is a relative interpreter path: the components start in the work directory,
            # where the same relative path would name another file.
            python = str((project_dir() / Path(python).expanduser()).absolute())
    wildcard = v.bind_host in ("0.0.0.0", "::")
    connect = v.connect_host or (ssh.host if ssh and wildcard else None)
    if connect is None:
        connect = "127.0.0.1" if wildcard else v.bind_host
    return Target(
        name=name,
        description=v.description,
        transport=v.transport,
        ssh=ssh,
        gpus=tuple(v.gpus),
        workdir=workdir,
        python=python,
        launcher=v.launcher,
        bind_host=v.bind_host,
        connect_host=connect,
        port_offset=v.port_offset,
        twin_env=tuple(sorted(v.twin_env.items())),
        smg_python=_smg_python(v),
    )


def _smg_python(v: BoxTarget) -> str | None:
    """targets.yaml's smg_python; unset, a local target runs SMG from this machine's SMG venv
    (`make install`'s record, or $DSV4OPS_SMG_PYTHON) and an SSH target from its `python`."""
    if v.smg_python:
        path = Path(v.smg_python).expanduser()
        local_relative = v.transport == "local" and "/" in v.smg_python
        return str((project_dir() / path).absolute()) if local_relative else v.smg_python
    return str(smg_python()) if v.transport == "local" else None


def _endpoint(name: str, v: EndpointTarget) -> Target:
    """The Target of a `transport: endpoint` entry: the fields of a box are inert there."""
    return Target(
        name=name,
        description=v.description,
        transport="endpoint",
        ssh=None,
        gpus=(),
        workdir="",
        python=sys.executable,
        launcher="none",
        bind_host="",
        connect_host=urlsplit(v.router_url).hostname or "",
        port_offset=0,
        twin_env=(),
        endpoint=EndpointSpec(
            router_url=v.router_url,
            prefill=tuple(v.metrics.prefill),
            decode=tuple(v.metrics.decode),
            router_metrics=v.metrics.router,
            profile=v.profile,
            namespace=v.namespace,
            replicas=v.replicas,
        ),
    )
