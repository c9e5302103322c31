"""Frozen value objects: what a loaded profile and a target are (a rendered deployment is
`dsv4ops.deployment.Deployment`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# A rendered deployment is the one `Deployment` value of the bottom layer (dsv4ops/deployment.py);
# re-exported here because profiles build it and their warnings travel with it.
from dsv4ops.apikey import ApiKeyRef
from dsv4ops.constants import SSH_RECONNECT_S
from dsv4ops.deployment import Component, Deployment, ProfileWarning, served_model_name
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.settings import setting
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind
from dsv4ops.timings import STOP_GRACE_S

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
    # Seconds a stop gives its graceful exit (recorded in the deployment, not in its argv).
    stop_grace_s: float = STOP_GRACE_S

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
    api_key: ApiKeyRef | None = None  # where the key lives, by reference (None: no key)
    kind: RouterKind = DEFAULT_ROUTER_KIND
    prefill_policy: str | None = None  # unset: --policy serves the prefill too
    decode_policy: str | None = None
    stop_grace_s: float = STOP_GRACE_S  # as ServerSpec's

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


# Bounds of the canary's concurrency levels (profiles/schema.py uses the same).
MAX_CONCURRENCY = 4096
# How the deploy's end-to-end probe asks for its tool call (orchestrate/probe.py): forced with
# `tool_choice: required` (SGLang constrains the output to the parser's call grammar), asked with
# `auto` (the parser must still find a call), or not asked at all.
PROBE_TOOL_CALL = ("required", "auto", "off")


@dataclass(frozen=True)
class CanaryThresholds:
    """The profile's `canary` section: what the canary suites judge a deployment by (units in
    the names). Each field is the one declaration of its setting (profiles/settings.py): the
    schema, this value, the journal record's reading, docs/profiles.md's table and the canary's
    `Thresholds` all derive from it. To add a setting, add a field here."""

    smoke_requests: int = setting(
        8, minimum=1, maximum=10_000, doc="requests the smoke suite sends"
    )
    corruption_max_rate: float = setting(
        0.0, minimum=0.0, maximum=1.0, doc="share of corrupted tool calls tolerated"
    )
    consistency_min_agreement: float = setting(
        0.95, minimum=0.0, maximum=1.0, doc="agreement of answers at concurrency 1 and under load"
    )
    first_token_deadline_s: float = setting(
        60.0, minimum=0.0, maximum=3600.0, doc="seconds a request may wait for its first token"
    )
    # Per-request backstop: a request still open after this long is cut and counted as a hang.
    hang_deadline_s: float = setting(
        120.0, minimum=0.0, maximum=3600.0, doc="seconds after which an open request is a hang"
    )
    abort_cascade_recovery_s: float = setting(
        60.0,
        minimum=0.0,
        maximum=3600.0,
        doc="seconds for running + queued to get back after aborts",
    )
    stress_concurrency: int = setting(
        80, minimum=1, maximum=MAX_CONCURRENCY, doc="sessions of the corruption suite's load"
    )
    stress_duration_s: float = setting(
        120.0, minimum=0.0, maximum=86400.0, doc="seconds of soak load (and an A/B block)"
    )
    # How long the deploy's (and rollback's) gate runs each flag-aware suite (the corruption,
    # abort-cascade and sweep suites a flag change calls for; smoke sends its request count).
    # `deploy --canary-duration` overrides it for one deploy; a runbook's deploy, whose command
    # text is the box's, gets it from the profile.
    gate_duration_s: float = setting(
        20.0,
        minimum=1.0,
        maximum=3600.0,
        doc="seconds of each flag-aware suite in the deploy's canary gate",
    )
    sweep_concurrency: tuple[int, ...] = setting(
        (32, 48, 56, 57, 64, 72, 80, 88, 96),
        minimum=1,
        maximum=MAX_CONCURRENCY,
        max_items=64,
        doc="the sweep's concurrency staircase",
    )
    sweep_throughput_tolerance_pct: float = setting(
        5.0, minimum=0.0, maximum=100.0, doc="distance from the throughput law a level may fall"
    )
    sawtooth_max_drop_pct: float = setting(
        5.0, minimum=0.0, maximum=100.0, doc="drop past a CUDA-graph bucket that is a sawtooth"
    )
    # Hang watchdog: a stream silent this long is stalled; no token anywhere this long is a
    # server-wide freeze (and the floor of the metrics-side no-progress window). 2 s keeps
    # detection under 3 s, far below SGLang's 300 s timeouts.
    stall_s: float = setting(
        2.0, minimum=0.1, maximum=600.0, doc="seconds a stream may be silent before it is stalled"
    )
    freeze_s: float = setting(
        2.0, minimum=0.1, maximum=600.0, doc="seconds without a token anywhere that are a freeze"
    )
    # Run the suites with chat_template_kwargs.thinking (needs model.reasoning_parser);
    # tool-call requests get thinking_budget_tokens more max_tokens for the reasoning.
    thinking: bool = setting(False, doc="suites ask for reasoning (chat_template_kwargs)")
    thinking_budget_tokens: int = setting(
        1024, minimum=1, maximum=131072, doc="extra max_tokens of a request when thinking"
    )
    # The suites' tool-call requests (a nonce echoed in the call's arguments). A model that
    # cannot copy text from its prompt (the tiny CPU model) declares false: the suites send
    # none, corruption answers INCONCLUSIVE, and every verdict says the checks were off.
    tool_calls: bool = setting(True, doc="suites send tool-call requests")


@dataclass(frozen=True)
class ProbeSettings:
    """The profile's `probe` section: how the deploy's end-to-end probe checks the deployed model
    (orchestrate/probe.py). Declared like `CanaryThresholds` (profiles/settings.py)."""

    # What the deployed model can do, declared: DSV4 spells a forced call; a model that cannot
    # satisfy the call grammar (the tiny CPU model, docs/twin.md) says `auto`, one that calls no
    # tools `off`. A deploy whose probe skipped or did not force the call says so.
    tool_call: str = setting(
        "required",
        choices=PROBE_TOOL_CALL,
        doc="the probe's tool call: forced (required), offered (auto) or not sent (off)",
    )


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

    def to_dict(self) -> JSONObject:
        """Resolved values as plain data (for show/diff/--json); provenance fields left out."""
        data = asdict(self)
        for key in ("warnings", "chain", "path", "git_rev", "origins"):
            data.pop(key)
        for side in ("prefill", "decode"):
            data[side]["env"] = dict(self.prefill.env if side == "prefill" else self.decode.env)
        data["router"]["env"] = dict(self.router.env)
        data["router"]["kind"] = str(self.router.kind)
        return data


@dataclass(frozen=True)
class SSHSpec:
    host: str
    port: int
    user: str | None
    key: str | None
    known_hosts: str | None
    trust_on_first_use: bool
    # Seconds calls ride out a connection that dropped after it had worked (remote/rideout.py).
    reconnect_s: float = SSH_RECONNECT_S


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
    # The interpreter of a `router.kind: smg` router (None: `python`): SMG cannot share the
    # venv that runs sglang-router 0.3.2 (their `smg` console scripts collide).
    smg_python: str | None = None

    def router_python(self, kind: RouterKind) -> str:
        """The interpreter that runs the router of this kind on this target."""
        return (self.smg_python or self.python) if kind is RouterKind.SMG else self.python

    @property
    def twin_env_dict(self) -> dict[str, str]:
        return dict(self.twin_env)
