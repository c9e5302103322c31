"""Frozen value objects: what a loaded profile and a target are (a rendered deployment is
`dsv4ops.deployment.Deployment`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# A rendered deployment is the one `Deployment` value of the bottom layer (dsv4ops/deployment.py);
# re-exported here because profiles build it and their warnings travel with it.
from dsv4ops.deployment import Component, Deployment, ProfileWarning, served_model_name

__all__ = ["Component", "Deployment", "ProfileWarning"]


@dataclass(frozen=True)
class ModelSpec:
    path: str
    served_name: str | None
    tool_call_parser: str | None
    reasoning_parser: str | None
    trust_remote_code: bool

    @property
    def request_name(self) -> str:
        """The model name requests carry (the one rule: dsv4ops.deployment.served_model_name)."""
        return served_model_name(self.served_name, self.path)


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
    tool_calls: bool = True  # suites send tool-call requests (off: the model cannot echo a nonce)


@dataclass(frozen=True)
class ProbeSettings:
    """How the deploy's end-to-end probe checks the deployed model (orchestrate/probe.py)."""

    tool_call: str = "required"  # required | auto | off (schema.PROBE_TOOL_CALL)


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
    probe: ProbeSettings = ProbeSettings()
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
class EndpointSpec:
    """A cluster reached only over HTTP (`transport: endpoint`): its router and the prefill and
    decode servers whose /metrics the canary reads. dsv4ops starts nothing there."""

    router_url: str
    prefill: tuple[str, ...]
    decode: tuple[str, ...]
    router_metrics: str | None  # the router's Prometheus base URL (its --prometheus-port)
    profile: str | None  # the profile the cluster runs (for the export line and the canary)
    namespace: str | None  # the RoleBasedGroup's namespace (for the kubectl lines)
    replicas: int | None  # its prefill:decode pairs (the export line keeps them)


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    transport: str  # "local" | "ssh" | "endpoint"
    ssh: SSHSpec | None
    gpus: tuple[int, ...]
    workdir: str
    python: str
    launcher: str  # "sglang" | "twin"
    bind_host: str
    connect_host: str
    port_offset: int
    twin_env: tuple[tuple[str, str], ...]
    # Set for `transport: endpoint` only; the fields above are then inert (no GPUs, no work
    # directory): everything that would start or stop a process refuses such a target.
    endpoint: EndpointSpec | None = None

    @property
    def twin_env_dict(self) -> dict[str, str]:
        return dict(self.twin_env)
