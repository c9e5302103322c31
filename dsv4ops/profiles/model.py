"""Frozen value objects: what a loaded profile and a target are (a rendered deployment is
`dsv4ops.deployment.Deployment`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# A rendered deployment is the one `Deployment` value of the bottom layer (dsv4ops/deployment.py);
# re-exported here because profiles build it and their warnings travel with it.
from dsv4ops.apikey import ApiKeyRef
from dsv4ops.constants import SSH_RECONNECT_S
from dsv4ops.deployment import Component, Deployment, ProfileWarning
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.profile_spec import (
    DecodeSection,
    FlagsSection,
    PrefillSection,
    RouterSection,
)
from dsv4ops.profiles.profile_spec import ModelSection as ModelSpec
from dsv4ops.routerkind import RouterKind
from dsv4ops.settings import CanaryThresholds, ProbeSettings

# The declared sections a deployment carries live below it (dsv4ops/settings.py).
__all__ = [
    "CanaryThresholds",
    "Component",
    "Deployment",
    "ModelSpec",
    "ProbeSettings",
    "ProfileWarning",
    "ServerSpec",
]

# One SGLang server of the PD pair: its profile section as validated (`role` names the side).
ServerSpec = DecodeSection


@dataclass(frozen=True)
class Profile:
    name: str
    path: str
    chain: tuple[str, ...]  # the file itself, then each file it extends
    schema_version: int
    description: str
    model: ModelSpec
    prefill: PrefillSection
    decode: DecodeSection
    bootstrap_port: int
    router: RouterSection
    flags: FlagsSection  # as validated: flags.decode_buckets is the spec or list as written
    kernel_package: str | None
    canary: CanaryThresholds
    probe: ProbeSettings = ProbeSettings()
    # Where router.api_key says the router's key lives (None: no key, or a reference refused).
    router_key: ApiKeyRef | None = None
    warnings: tuple[ProfileWarning, ...] = ()
    git_rev: str | None = None
    # key path -> (file, line) that set it; for errors found later (e.g. against a target).
    origins: dict[str, tuple[str, int]] = field(default_factory=dict, compare=False, repr=False)
    # flags.decode_buckets resolved against the decode: exactly what --cuda-graph-bs-decode gets
    decode_buckets: tuple[int, ...] = ()

    def to_dict(self) -> JSONObject:
        """Resolved values as plain data (for show/diff/--json); provenance fields left out."""
        data = asdict(self)
        data["model"] = self.model.model_dump()
        data["canary"], data["probe"] = self.canary.model_dump(), self.probe.model_dump()
        for key in ("warnings", "chain", "path", "git_rev", "origins", "router_key"):
            data.pop(key)
        # As the profile's record always held its flags: each on/off flag, the bucket spec as
        # written, then the buckets it resolves to (the journal's records hold this shape).
        spec = self.flags.decode_buckets
        data["flags"] = {
            **self.flags.model_dump(exclude={"decode_buckets"}),
            "decode_buckets_spec": spec if isinstance(spec, str) else tuple(spec),
            "decode_buckets": data.pop("decode_buckets"),
        }
        for side in (self.prefill, self.decode):
            # As the profile's record always held a server: its role first, no bootstrap_port
            # (the profile's own key), the environment sorted.
            values = side.model_dump(exclude={"bootstrap_port"})
            data[side.role] = {"role": side.role, **values, "env": side.env_dict}
        r = self.router
        # In the order, and with the resolved key and kind, the profile's record always held.
        data["router"] = {
            "port": r.port,
            "prometheus_port": r.prometheus_port,
            "policy": r.policy,
            "health_check": r.health_check.model_dump(),
            "extra_args": list(r.extra_args),
            "env": r.env_dict,
            "api_key": asdict(self.router_key) if self.router_key is not None else None,
            "kind": str(r.kind),
            "prefill_policy": r.prefill_policy,
            "decode_policy": r.decode_policy,
            "stop_grace_s": float(r.stop_grace_s),
        }
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
