"""What the orchestrator deploys: a Deployment (one rendered profile) of three ComponentSpecs.

Built either from a freshly rendered profile or from a journal record, so a rollback redeploys
exactly what was recorded. Pure data; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv4ops.errors import DeployError
from dsv4ops.remote.base import ProcessSpec, redact_argv, redact_env

START_ORDER: tuple[str, ...] = ("prefill", "decode", "router")
STOP_ORDER: tuple[str, ...] = ("router", "decode", "prefill")
WORKERS: tuple[str, ...] = ("prefill", "decode")
_ANY_ADDRESS = {"", "0.0.0.0", "::", "[::]"}


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


@dataclass(frozen=True)
class ComponentSpec:
    """One process of the deployment: exact argv/env and the ports it binds."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0
    ports: tuple[int, ...] = ()

    @property
    def probe_host(self) -> str:
        # HTTP checks run on the target itself (through the agent), so the address is where the
        # process binds (--host), with a wildcard bind reached over loopback.
        bind = _flag_value(self.argv, "--host") or self.host
        return "127.0.0.1" if bind in _ANY_ADDRESS else bind

    def url(self, path: str = "") -> str:
        return f"http://{self.probe_host}:{self.port}{path}"

    @property
    def bootstrap_port(self) -> int | None:
        """The prefill's KV bootstrap server port (read from argv, sglang's default 8998)."""
        if self.name != "prefill":
            return None
        value = _flag_value(self.argv, "--disaggregation-bootstrap-port")
        return int(value) if value else 8998

    @property
    def metrics_port(self) -> int:
        """Where /metrics is served: the router's Prometheus port, else the server port."""
        if self.name == "router":
            value = _flag_value(self.argv, "--prometheus-port")
            return int(value) if value else 29000
        return self.port

    def process_spec(self) -> ProcessSpec:
        ports = self.ports or (self.port,)
        return ProcessSpec(name=self.name, argv=self.argv, env=dict(self.env), ports=tuple(ports))

    def record(self) -> dict[str, Any]:
        """JSON for the journal (secrets redacted)."""
        return {
            "name": self.name,
            "argv": redact_argv(self.argv),
            "env": redact_env(self.env),
            "host": self.host,
            "port": self.port,
            "ports": list(self.ports),
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> ComponentSpec:
        return cls(
            name=str(data["name"]),
            argv=tuple(str(a) for a in data["argv"]),
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            host=str(data.get("host") or "127.0.0.1"),
            port=int(data.get("port") or 0),
            ports=tuple(int(p) for p in data.get("ports") or ()),
        )

    @property
    def has_redacted_values(self) -> bool:
        return "***" in self.argv or any(v == "***" for v in self.env.values())


@dataclass(frozen=True)
class Deployment:
    """A rendered profile for one target, plus where it came from (for the journal)."""

    profile_name: str
    components: tuple[ComponentSpec, ...]
    profile_path: str | None = None
    git_commit: str | None = None
    commands_hash: str = ""
    content: Mapping[str, Any] | None = None  # the resolved profile, for the record
    flags: Mapping[str, Any] = field(default_factory=dict)
    kernel_package: str | None = None
    source_op: str | None = None  # journal op this was rebuilt from (rollback)

    def __post_init__(self) -> None:
        names = [c.name for c in self.components]
        if sorted(names) != sorted(START_ORDER):
            raise DeployError(
                f"profile {self.profile_name} renders components {names}; "
                f"a PD deployment needs exactly {', '.join(START_ORDER)}"
            )
        if not self.commands_hash:
            object.__setattr__(self, "commands_hash", commands_hash(self.components))

    def component(self, name: str) -> ComponentSpec:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def in_order(self, order: Sequence[str] = START_ORDER) -> list[ComponentSpec]:
        return [self.component(n) for n in order]

    def profile_record(self) -> dict[str, Any]:
        return {
            "name": self.profile_name,
            "path": self.profile_path,
            "git_commit": self.git_commit,
            "commands_hash": self.commands_hash,
            "kernel_package": self.kernel_package,
            "flags": dict(self.flags),
            "content": dict(self.content) if self.content is not None else None,
        }

    def component_records(self) -> list[dict[str, Any]]:
        return [c.record() for c in self.in_order()]

    def describe(self) -> str:
        commit = (self.git_commit or "uncommitted")[:12]
        return f"{self.profile_name} @ {commit}"


def commands_hash(components: Sequence[ComponentSpec]) -> str:
    """sha256 over the exact commands in start order; equal to profiles' Rendered.commands_hash."""
    order = {n: i for i, n in enumerate(START_ORDER)}
    payload = [
        {"name": c.name, "argv": list(c.argv), "env": dict(sorted(c.env.items()))}
        for c in sorted(components, key=lambda c: order.get(c.name, 99))
    ]
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def deployment_from_rendered(
    rendered: Any,
    *,
    profile: Any = None,
    profile_path: str | None = None,
    git_commit: str | None = None,
) -> Deployment:
    """Adapt `profiles.render(...)` output (Contract 1) to a Deployment."""
    comps = tuple(
        ComponentSpec(
            name=c.name,
            argv=tuple(c.argv),
            env=dict(c.env or {}),
            host=c.host,
            port=int(c.port),
            ports=tuple(int(p) for p in (getattr(c, "ports", None) or (c.port,))),
        )
        for c in rendered.components
    )
    name = getattr(profile, "name", None) or getattr(rendered, "profile", None) or "unnamed"
    rhash = rendered.commands_hash() if hasattr(rendered, "commands_hash") else ""
    flags = getattr(profile, "flags", None)
    return Deployment(
        profile_name=str(name),
        components=comps,
        profile_path=profile_path,
        git_commit=git_commit,
        commands_hash=rhash,
        content=_profile_content(profile),
        flags=_as_dict(flags),
        kernel_package=getattr(profile, "kernel_package", None),
    )


def deployment_from_record(op: Any) -> Deployment:
    """Rebuild the exact Deployment a journal operation recorded."""
    p = op.profile or {}
    if not op.components:
        raise DeployError(f"journal entry {op.op} recorded no components; cannot redeploy it")
    return Deployment(
        profile_name=p.get("name") or "unnamed",
        components=tuple(ComponentSpec.from_record(c) for c in op.components),
        profile_path=p.get("path"),
        git_commit=p.get("git_commit"),
        commands_hash=p.get("commands_hash") or "",
        content=p.get("content"),
        flags=p.get("flags") or {},
        kernel_package=p.get("kernel_package"),
        source_op=op.op,
    )


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    return {"value": repr(value)}


def _profile_content(profile: Any) -> dict[str, Any] | None:
    if profile is None:
        return None
    for attr in ("to_dict", "as_dict", "to_json"):
        fn = getattr(profile, attr, None)
        if callable(fn):
            try:
                data = fn()
            except TypeError:
                continue
            if isinstance(data, Mapping):
                return dict(data)
    raw = getattr(profile, "raw", None) or getattr(profile, "data", None)
    return dict(raw) if isinstance(raw, Mapping) else _as_dict(profile)
