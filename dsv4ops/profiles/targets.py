"""Targets: where a profile runs (the box over SSH, or the twin on this machine), or a cluster
reached at its router's URL (`transport: endpoint`, profiles/endpoint_target.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from dsv4ops._yaml import YAMLSyntaxError, load_with_lines
from dsv4ops.constants import (
    PROFILE_SCHEMA_VERSION,
    PROJECT_HINT,
    TARGETS_FILE,
    profiles_dir,
    project_dir,
)
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.endpoint_target import build_endpoint_target, is_endpoint
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.files import read_bounded
from dsv4ops.profiles.model import SSHSpec, Target
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.routers import smg_python
from dsv4ops.profiles.targets_schema import TARGET_SCHEMA
from dsv4ops.profiles.typecheck import check_unknown_keys, normalize

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
    unknown = sorted(set(data) - {"schema_version", "targets"})
    if unknown:
        raise ProfileError(
            "unknown key; valid keys here: schema_version, targets",
            path=shown,
            line=lines.get(unknown[0]),
            key=unknown[0],
        )
    entries = data.get("targets")
    if not isinstance(entries, dict) or not entries:
        raise ProfileError(
            "expected a mapping of target name -> settings",
            path=shown,
            line=lines.get("targets"),
            key="targets",
        )
    prov = Provenance(shown)
    prov.record(shown, lines, data)
    targets = {}
    for name, raw in entries.items():
        prefix = f"targets.{name}"
        if not isinstance(raw, dict):
            raise ProfileError(
                "expected a mapping of settings", path=shown, line=lines.get(prefix), key=prefix
            )
        if is_endpoint(raw):
            targets[str(name)] = build_endpoint_target(str(name), raw, shown, lines, prov, prefix)
            continue
        check_unknown_keys(raw, TARGET_SCHEMA, shown, lines, prefix)
        targets[str(name)] = _build(
            str(name), normalize(raw, TARGET_SCHEMA, prov, prefix), prov, prefix
        )
    return targets


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


def _build(name: str, v: JSONObject, prov: Provenance, prefix: str) -> Target:
    ssh = None
    if v["transport"] == "ssh":
        s = v["ssh"]
        if not s["host"]:
            raise prov.error(f"{prefix}.ssh.host", "an ssh target needs ssh.host")
        ssh = SSHSpec(
            host=s["host"],
            port=s["port"],
            user=s["user"],
            key=s["key"],
            known_hosts=s["known_hosts"],
            trust_on_first_use=s["trust_on_first_use"],
            reconnect_s=float(s["reconnect_s"]),
        )
    gpus = v["gpus"]
    if len(set(gpus)) != len(gpus) or any(g < 0 for g in gpus):
        raise prov.error(f"{prefix}.gpus", f"expected distinct GPU ids >= 0, got {gpus}")
    # `launcher: twin` is allowed over SSH too: the twin is just another launcher on the target.
    # Its `python` must have dsv4ops installed; when it does not, the prefill exits at once and
    # the deploy's readiness wait reports that (orchestrate/engine.py names the missing module).
    python = v["python"] or (sys.executable if v["transport"] == "local" else "python3")
    workdir = v["workdir"]
    if v["transport"] == "local":
        # Relative local work directories are relative to the project (like the state dir), so a
        # command run from a subdirectory finds the unit a command from the root deployed.
        workdir = str((project_dir() / Path(workdir).expanduser()).absolute())
        if "/" in python and not Path(python).expanduser().is_absolute():
            # So is a relative interpreter path: the components start in the work directory,
            # where the same relative path would name another file.
            python = str((project_dir() / Path(python).expanduser()).absolute())
    connect = v["connect_host"] or (
        ssh.host if ssh and v["bind_host"] in ("0.0.0.0", "::") else None
    )
    if connect is None:
        connect = "127.0.0.1" if v["bind_host"] in ("0.0.0.0", "::") else v["bind_host"]
    return Target(
        name=name,
        description=v["description"] or "",
        transport=v["transport"],
        ssh=ssh,
        gpus=tuple(gpus),
        workdir=workdir,
        python=python,
        launcher=v["launcher"],
        bind_host=v["bind_host"],
        connect_host=connect,
        port_offset=v["port_offset"],
        twin_env=tuple(sorted(v["twin_env"].items())),
        smg_python=_smg_python(v),
    )


def _smg_python(v: JSONObject) -> str | None:
    """targets.yaml's smg_python; unset, a local target runs SMG from this machine's SMG venv
    (`make install`'s record, or $DSV4OPS_SMG_PYTHON) and an SSH target from its `python`."""
    if v["smg_python"]:
        path = Path(v["smg_python"]).expanduser()
        local_relative = v["transport"] == "local" and "/" in v["smg_python"]
        return str((project_dir() / path).absolute()) if local_relative else v["smg_python"]
    return str(smg_python()) if v["transport"] == "local" else None
