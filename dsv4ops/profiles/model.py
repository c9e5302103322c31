"""Frozen value objects: what a loaded profile, a target and a rendered deployment are."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    path: str
    served_name: str | None
    tool_call_parser: str | None
    reasoning_parser: str | None
    trust_remote_code: bool


@dataclass(frozen=True)
class ServerSpec:
    """One SGLang server of the PD pair (prefill or decode)."""

    role: str  # "prefill" | "decode"
    gpus: tuple[int, ...]
    tp: int
    port: int
    transfer_backend: str
    page_size: int
    kv_cache_dtype: str
    mem_fraction_static: float | None
    max_running_requests: int | None
    extra_args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class HealthCheck:
    endpoint: str
    interval_secs: int
    timeout_secs: int
    failure_threshold: int
    success_threshold: int


@dataclass(frozen=True)
class RouterSpec:
    port: int
    prometheus_port: int
    policy: str
    health_check: HealthCheck
    extra_args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Flags:
    """The operational flags the seeds care about (each has a known trade-off)."""

    overlap_schedule: bool
    multi_stream_overlap: bool
    decode_buckets_spec: str | tuple[int, ...]
    decode_buckets: tuple[int, ...]  # resolved: exactly what --cuda-graph-bs-decode gets


@dataclass(frozen=True)
class CanaryThresholds:
    """Thresholds the canary suites judge a deployment by (units in the names)."""

    smoke_requests: int
    corruption_max_rate: float
    consistency_min_agreement: float
    first_token_deadline_s: float
    hang_deadline_s: float
    abort_cascade_recovery_s: float
    stress_concurrency: int
    stress_duration_s: float
    sweep_concurrency: tuple[int, ...]
    sweep_throughput_tolerance_pct: float
    sawtooth_max_drop_pct: float
    stall_s: float
    freeze_s: float
    thinking: bool = False  # suites ask for reasoning (chat_template_kwargs.thinking)
    thinking_budget_tokens: int = 1024


@dataclass(frozen=True)
class ProfileWarning:
    """A known hazard or a soft rule: not an error, but canaries and operators act on it."""

    code: str
    message: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


@dataclass(frozen=True)
class Profile:
    name: str
    path: str
    chain: tuple[str, ...]  # the file itself, then each file it extends
    schema_version: int
    description: str
    model: ModelSpec
    prefill: ServerSpec
    decode: ServerSpec
    bootstrap_port: int
    router: RouterSpec
    flags: Flags
    kernel_package: str | None
    canary: CanaryThresholds
    warnings: tuple[ProfileWarning, ...] = ()
    git_rev: str | None = None
    # key path -> (file, line) that set it; for errors found later (e.g. against a target).
    origins: dict[str, tuple[str, int]] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Resolved values as plain data (for show/diff/--json); provenance fields left out."""
        data = asdict(self)
        for key in ("warnings", "chain", "path", "git_rev", "origins"):
            data.pop(key)
        for side in ("prefill", "decode"):
            data[side]["env"] = dict(self.prefill.env if side == "prefill" else self.decode.env)
        data["router"]["env"] = dict(self.router.env)
        return data


@dataclass(frozen=True)
class SSHSpec:
    host: str
    port: int
    user: str | None
    key: str | None
    known_hosts: str | None
    trust_on_first_use: bool


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    transport: str  # "local" | "ssh"
    ssh: SSHSpec | None
    gpus: tuple[int, ...]
    workdir: str
    python: str
    launcher: str  # "sglang" | "twin"
    bind_host: str
    connect_host: str
    port_offset: int
    twin_env: tuple[tuple[str, str], ...]

    @property
    def twin_env_dict(self) -> dict[str, str]:
        return dict(self.twin_env)


@dataclass(frozen=True)
class Component:
    """One process of the deployment, ready to start: exact argv and env."""

    name: str  # "prefill" | "decode" | "router"
    argv: tuple[str, ...]
    env: dict[str, str]  # only what the command needs on top of the target's environment
    host: str  # address the operator machine uses to reach `port`
    port: int  # the HTTP API port
    ports: tuple[int, ...]  # every port the process binds
    metrics_port: int  # where /metrics is served (servers: the API port; router: Prometheus)

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "argv": list(self.argv),
            "env": dict(self.env),
            "host": self.host,
            "port": self.port,
            "ports": list(self.ports),
            "metrics_port": self.metrics_port,
        }


@dataclass(frozen=True)
class Rendered:
    profile: str
    target: str
    components: tuple[Component, ...]
    warnings: tuple[ProfileWarning, ...] = field(default=())

    def component(self, name: str) -> Component:
        for comp in self.components:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "target": self.target,
            "components": [c.to_json() for c in self.components],
        }

    def commands_hash(self) -> str:
        """sha256 over every component's name, argv and env (order-stable); hex digest."""
        payload = [
            {"name": c.name, "argv": list(c.argv), "env": dict(sorted(c.env.items()))}
            for c in self.components
        ]
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()
