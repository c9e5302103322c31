"""The one model of a deployment: a frozen `Deployment` of three `Component`s.

`profiles.render` builds it from a profile and a target; the journal stores it (`to_record`) and
rebuilds it (`from_record`), so a rollback redeploys exactly what was recorded; orchestrate
deploys it; the canary reads its endpoint, model name and thresholds section from it. Every
port is computed once, at render time, from the profile; nothing is parsed back from argv
except when reading a journal written before those fields were recorded.

The profile's declared sections it records (`canary`, `probe`) are read back through their
declarations (dsv4ops/settings.py, through dsv4ops/recorded.py), once, by `Deployment.canary`
and `Deployment.probe`, and the `model` and `router` it needs (`model_name`, `router_kind`):
the only readers of those sections of a record. A recorded value that
fits no declaration raises
RecordedSettingError naming the operation, the key and the value (docs/deploy.md, "Recorded
settings"); it is never replaced by a default.

Bottom layer: imports only `errors`, `secrets`, `routerkind`, `settings`, `recorded`,
`constants`, `timings` and `apikey` (whose reading it never calls). Pure data; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from dsv4ops.apikey import API_KEY_FLAG, ApiKeyRef
from dsv4ops.constants import (
    PD_BOOTSTRAP_TIMEOUT_ENV,
    PD_WAITING_TIMEOUT_ENV,
    SGLANG_DEFAULT_DECODE_LOG_INTERVAL,
    SGLANG_PD_TIMEOUT_DEFAULT_S,
)
from dsv4ops.errors import DeployError
from dsv4ops.jsontypes import JSONObject, JSONValue
from dsv4ops.recorded import (
    RecordedModel,
    RecordedRouter,
    Section,
    read_section,
    recorded_grace,
)
from dsv4ops.routerkind import RouterKind
from dsv4ops.secrets import REDACTED, redact_argv, redact_env
from dsv4ops.settings import CanaryThresholds, ProbeSettings
from dsv4ops.timings import STOP_GRACE_S

START_ORDER: tuple[str, ...] = ("prefill", "decode", "router")
STOP_ORDER: tuple[str, ...] = ("router", "decode", "prefill")
WORKERS: tuple[str, ...] = ("prefill", "decode")
ANY_ADDRESS: frozenset[str] = frozenset({"", "0.0.0.0", "::", "[::]"})
DEFAULT_MODEL = "default"


def served_model_name(served_name: str | None, path: str | None) -> str:
    """The model name requests carry: SGLang serves `--served-model-name`, else the model path."""
    return served_name or path or DEFAULT_MODEL


@dataclass(frozen=True)
class ProfileWarning:
    """A known hazard or a soft rule: not an error, but canaries and operators act on it."""

    code: str
    message: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


@dataclass(frozen=True)
class Component:
    """One process of the deployment, ready to start: exact argv and env, and its ports.

    `host` is the address the operator machine uses (the canary's endpoint); `bind_host` is the
    process's `--host`, which the orchestrator's checks use from the target itself.
    """

    name: str  # "prefill" | "decode" | "router"
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # on top of the target's environment
    host: str = "127.0.0.1"
    port: int = 0  # the HTTP API port
    ports: tuple[int, ...] = ()  # every port the process binds
    metrics_port: int = 0  # where /metrics is served (servers: the API port; router: Prometheus)
    bootstrap_port: int | None = None  # the prefill's KV bootstrap server; None elsewhere
    bind_host: str = ""  # the process's --host; "" means `host`
    # The router's key, by reference: argv holds `--api-key ***`, filled in only when started.
    api_key: ApiKeyRef | None = None
    # Seconds a stop gives this process's graceful exit before SIGKILL (the profile's
    # `<name>.stop_grace_s`). Recorded, so a stop uses what was deployed; not in the commands
    # hash: it changes no process, only how long one is waited for.
    stop_grace_s: float = STOP_GRACE_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "ports", tuple(self.ports))
        if not self.metrics_port:
            object.__setattr__(self, "metrics_port", self.port)

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def probe_host(self) -> str:
        # HTTP checks run on the target itself (through the agent), so the address is where the
        # process binds, with a wildcard bind reached over loopback.
        bind = self.bind_host or self.host
        return "127.0.0.1" if bind in ANY_ADDRESS else bind

    def url(self, path: str = "") -> str:
        """The API as the target itself reaches it (orchestrator checks run through the agent)."""
        return f"http://{self.probe_host}:{self.port}{path}"

    def client_url(self, path: str = "") -> str:
        """The API as this (the operator's) machine reaches it: what the canary sends load to."""
        return f"http://{self.host}:{self.port}{path}"

    @property
    def metrics_url(self) -> str:
        """/metrics as this machine reaches it."""
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def has_redacted_values(self) -> bool:
        """True when rebuilt from a record whose secrets were blanked (cannot be started as is).
        The '***' after `--api-key` of a router whose key is a reference is not one of them: it
        is filled in from the reference when the router starts."""
        argv = list(self.argv)
        if self.api_key is not None and API_KEY_FLAG in argv[:-1]:
            i = argv.index(API_KEY_FLAG)
            argv = argv[:i] + argv[i + 2 :]
        return REDACTED in argv or any(v == REDACTED for v in self.env.values())

    def to_json(self) -> JSONObject:
        """The `profile render --json` view (values as they are; the printer redacts)."""
        return {
            "name": self.name,
            "argv": list(self.argv),
            "env": dict(self.env),
            "host": self.host,
            "port": self.port,
            "ports": list(self.ports),
            "metrics_port": self.metrics_port,
            "stop_grace_s": self.stop_grace_s,
            **({"key_from": self.api_key.to_record()} if self.api_key is not None else {}),
        }

    def to_record(self) -> JSONObject:
        """JSON for the journal, secrets redacted."""
        return {
            "name": self.name,
            "argv": redact_argv(self.argv),
            "env": redact_env(self.env),
            "host": self.host,
            "port": self.port,
            "ports": list(self.ports),
            "metrics_port": self.metrics_port,
            "bootstrap_port": self.bootstrap_port,
            "bind_host": self.bind_host,
            "stop_grace_s": self.stop_grace_s,
            # "key_from", not a secret-looking name: it is where the key lives, shown as is.
            **({"key_from": self.api_key.to_record()} if self.api_key is not None else {}),
        }

    @classmethod
    def from_record(cls, data: Mapping[str, JSONValue]) -> Component:
        """Rebuild from `to_record()` output, or from a record written before metrics_port,
        bootstrap_port and bind_host were recorded (then read from ports and argv)."""
        name = str(data["name"])
        argv = tuple(str(a) for a in data["argv"])
        port = int(data.get("port") or 0)
        ports = tuple(int(p) for p in data.get("ports") or ())
        legacy = _legacy_ports(name, argv, port, ports)
        metrics = data.get("metrics_port")
        bootstrap = data["bootstrap_port"] if "bootstrap_port" in data else legacy[1]
        bind = data["bind_host"] if "bind_host" in data else argv_value(argv, "--host")
        return cls(
            name=name,
            argv=argv,
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            host=str(data.get("host") or "127.0.0.1"),
            port=port,
            ports=ports,
            metrics_port=int(metrics) if metrics else legacy[0],
            bootstrap_port=int(bootstrap) if bootstrap is not None else None,
            bind_host=str(bind or ""),
            api_key=ApiKeyRef.from_record(data.get("key_from")),
            stop_grace_s=recorded_grace(data.get("stop_grace_s")),
        )


def argv_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in a command line (`--flag V` or `--flag=V`), or None."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _legacy_ports(
    name: str, argv: Sequence[str], port: int, ports: Sequence[int]
) -> tuple[int, int | None]:
    """(metrics_port, bootstrap_port) of a component recorded by a version that did not store
    them. Render always listed the router's Prometheus port and the prefill's bootstrap port
    second in `ports`; argv is the fallback for records without ports."""
    second = ports[1] if len(ports) > 1 else None
    if name == "router":
        prom = second or argv_value(argv, "--prometheus-port")
        return (int(prom) if prom else port), None
    if name == "prefill":
        boot = second or argv_value(argv, "--disaggregation-bootstrap-port")
        return port, (int(boot) if boot else None)
    return port, None


def commands_hash(components: Sequence[Component]) -> str:
    """sha256 over every component's name, argv and env, in start order; hex digest.

    The journal, drift and restore compare deployments by it: it must not change for the same
    commands (a test pins it for the shipped profiles).
    """
    order = {n: i for i, n in enumerate(START_ORDER)}
    payload: list[JSONObject] = [
        {"name": c.name, "argv": list(c.argv), "env": dict(sorted(c.env.items()))}
        # where the key comes from, only when there is one (the hashes of deployments without
        # a key are unchanged); the key itself never: rotating it is not a different deployment
        | ({"key_from": c.api_key.to_record()} if c.api_key is not None else {})
        for c in sorted(components, key=lambda c: order.get(c.name, 99))
    ]
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class Deployment:
    """A rendered profile for one target, plus where it came from (for the journal).

    `commands_hash` is computed from the components unless given: a deployment rebuilt from the
    journal keeps the recorded hash, which covers the real (unredacted) values.
    """

    profile_name: str
    components: tuple[Component, ...]
    profile_path: str | None = None
    git_commit: str | None = None
    commands_hash: str = ""
    content: Mapping[str, JSONValue] | None = None  # the resolved profile (Profile.to_dict())
    flags: Mapping[str, JSONValue] = field(default_factory=dict)
    kernel_package: str | None = None
    source_op: str | None = None  # journal op this was rebuilt from (rollback)
    target: str | None = None  # the target it was rendered for
    warnings: tuple[ProfileWarning, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", tuple(self.components))
        names = [c.name for c in self.components]
        if sorted(names) != sorted(START_ORDER):
            raise DeployError(
                f"profile {self.profile_name} renders components {names}; "
                f"a PD deployment needs exactly {', '.join(START_ORDER)}"
            )
        if not self.commands_hash:
            object.__setattr__(self, "commands_hash", commands_hash(self.components))

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def in_order(self, order: Sequence[str] = START_ORDER) -> list[Component]:
        return [self.component(n) for n in order]

    @cached_property
    def model_name(self) -> str:
        """The model name requests to this deployment carry (from its recorded `model`)."""
        model = self._section("model", RecordedModel)
        return served_model_name(model.served_name, model.path)

    @cached_property
    def canary(self) -> CanaryThresholds:
        """The profile's `canary` section as recorded, read once through its declaration
        (`Thresholds.judging` extends it; RecordedSettingError for a value that does not fit)."""
        return self._section("canary", CanaryThresholds)

    @cached_property
    def probe(self) -> ProbeSettings:
        """The profile's `probe` section as recorded (recorded before it existed: the default,
        a forced call, as it was probed). RecordedSettingError for a value that does not fit."""
        return self._section("probe", ProbeSettings)

    def check_recorded(self) -> None:
        """Read every recorded section now (RecordedSettingError before anything changes)."""
        _ = self.canary, self.probe, self.model_name, self.router_kind

    def _section(self, name: str, cls: type[Section]) -> Section:
        profile = self.profile_path or self.profile_name
        return read_section(self.content, name, cls, op=self.source_op, profile=profile)

    @property
    def decode_log_interval(self) -> int:
        """The decode's `--decode-log-interval` (SGLang's 40 when not given): decode iterations
        between two metric reports, which the canary's freeze detection must wait out."""
        value = argv_value(self.component("decode").argv, "--decode-log-interval")
        try:
            return max(1, int(value)) if value else SGLANG_DEFAULT_DECODE_LOG_INTERVAL
        except ValueError:  # SGLang would not have started with it; judge by the default
            return SGLANG_DEFAULT_DECODE_LOG_INTERVAL

    @cached_property
    def router_kind(self) -> RouterKind:
        """Which router fronts this deployment (its recorded router.kind): the one answer every
        command that talks to the router asks. Recorded before the choice: sglang-router."""
        return RouterKind(self._section("router", RecordedRouter).kind)

    @property
    def router_key(self) -> ApiKeyRef | None:
        """Where the router's API key lives on this machine (None: the router needs none)."""
        return self.component("router").api_key

    def pd_timeouts(self) -> dict[str, int | str]:
        """The PD timeouts the servers run with: the decode's KV waiting timeout and the
        prefill's bootstrap timeout, as their env sets them, else SGLang's default."""
        out: dict[str, int | str] = {}
        for key, side, env in (
            ("decode_waiting_s", "decode", PD_WAITING_TIMEOUT_ENV),
            ("prefill_bootstrap_s", "prefill", PD_BOOTSTRAP_TIMEOUT_ENV),
        ):
            value = self.component(side).env.get(env)
            out[key] = int(value) if value and value.isdigit() else SGLANG_PD_TIMEOUT_DEFAULT_S
            out[f"{key}_source"] = "profile" if value else "SGLang default"
        return out

    @property
    def decode_buckets(self) -> tuple[int, ...]:
        return tuple(int(b) for b in self.flags.get("decode_buckets") or ())

    def describe(self) -> str:
        commit = (self.git_commit or "uncommitted")[:12]
        return f"{self.profile_name} @ {commit}"

    def to_json(self) -> JSONObject:
        """The `profile render --json` view (without the hash, which the printer adds)."""
        return {
            "profile": self.profile_name,
            "target": self.target,
            "components": [c.to_json() for c in self.components],
        }

    def profile_record(self) -> JSONObject:
        return {
            "name": self.profile_name,
            "path": self.profile_path,
            "git_commit": self.git_commit,
            "commands_hash": self.commands_hash,
            "kernel_package": self.kernel_package,
            "flags": dict(self.flags),
            "content": dict(self.content) if self.content is not None else None,
        }

    def component_records(self) -> list[JSONObject]:
        return [c.to_record() for c in self.in_order()]

    def to_record(self) -> JSONObject:
        """What the journal's begin record stores: {"profile": {...}, "components": [...]}."""
        return {"profile": self.profile_record(), "components": self.component_records()}

    @classmethod
    def from_record(
        cls,
        profile: Mapping[str, JSONValue] | None,
        components: Sequence[Mapping[str, JSONValue]],
        *,
        source_op: str | None = None,
    ) -> Deployment:
        """Rebuild the exact Deployment a journal operation recorded (any journal version)."""
        p = profile or {}
        if not components:
            raise DeployError(
                f"journal entry {source_op or '?'} recorded no components; cannot redeploy it"
            )
        return cls(
            profile_name=p.get("name") or "unnamed",
            components=tuple(Component.from_record(c) for c in components),
            profile_path=p.get("path"),
            git_commit=p.get("git_commit"),
            commands_hash=p.get("commands_hash") or "",
            content=p.get("content"),
            flags=p.get("flags") or {},
            kernel_package=p.get("kernel_package"),
            source_op=source_op,
        )
