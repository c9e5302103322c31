"""A `Component` of a deployment: one process, ready to start (exact argv and env, its ports
and stop grace), how the journal records it (`to_record`) and reads it back (`from_record`,
through `RecordedFields`: a field that does not fit raises RecordedSettingError naming the
operation and the key, never a default), and the commands hash over the three of them.

Split from deployment.py (the Deployment of three of these). Imports only `errors`, `secrets`,
`recorded`, `timings` and `apikey` (whose reading it never calls). Pure data; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from dsv4ops.apikey import API_KEY_FLAG, ApiKeyRef
from dsv4ops.errors import RecordedSettingError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.recorded import RecordedFields, mend_component, recorded_grace
from dsv4ops.secrets import REDACTED, redact_argv, redact_env
from dsv4ops.timings import STOP_GRACE_S

T = TypeVar("T")
# The fields a read-only reader may leave unread (Component.from_record's `unread`).
UNREAD: frozenset[str] = frozenset({"stop_grace_s", "key_from"})
START_ORDER: tuple[str, ...] = ("prefill", "decode", "router")
ANY_ADDRESS: frozenset[str] = frozenset({"", "0.0.0.0", "::", "[::]"})


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
    def from_record(
        cls, data: object, *, op: str | None = None, unread: Collection[str] = ()
    ) -> Component:
        """Rebuild from `to_record()` output, or from a record written before metrics_port,
        bootstrap_port and bind_host were recorded (then read from ports and argv). `op`: the
        journal operation that recorded it. A field that does not fit raises
        RecordedSettingError naming the operation and `components.<name>.<key>`: never read
        as a default. `unread`: fields a reader that changes nothing does not need (UNREAD:
        status stops no process and sends no key; watch stops none): a damaged one is not read
        (the default grace, no key); status names it as a finding instead
        (orchestrate/status_recorded.py)."""
        r = RecordedFields.of(data, op)
        name, argv = r.name, r.argv()
        port = r.integer("port", 0)
        ports = r.integers("ports")
        legacy = _legacy_ports(name, argv, port, ports, op)
        metrics = r.integer("metrics_port", 0)
        bootstrap = r.optional_integer("bootstrap_port", legacy[1])
        bind = r.text("bind_host", argv_value(argv, "--host") or "")
        return cls(
            name=name,
            argv=argv,
            env=r.env(),
            host=r.text("host", "") or "127.0.0.1",
            port=port,
            ports=ports,
            metrics_port=metrics or legacy[0],
            bootstrap_port=bootstrap,
            bind_host=bind,
            api_key=_unless("key_from" in unread, r.key_from, None),
            stop_grace_s=_unless(
                "stop_grace_s" in unread,
                lambda: recorded_grace(r.raw("stop_grace_s"), where=r),
                STOP_GRACE_S,
            ),
        )


def _unless(skip: bool, read: Callable[[], T], unread: T) -> T:
    """`read()`; when `skip`, `unread` instead of a RecordedSettingError."""
    try:
        return read()
    except RecordedSettingError:
        if not skip:
            raise
        return unread


def argv_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in a command line (`--flag V` or `--flag=V`), or None."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _legacy_ports(
    name: str, argv: Sequence[str], port: int, ports: Sequence[int], op: str | None
) -> tuple[int, int | None]:
    """(metrics_port, bootstrap_port) of a component recorded by a version that did not store
    them. Render always listed the router's Prometheus port and the prefill's bootstrap port
    second in `ports`; argv is the fallback for records without ports (a value there that is
    no integer raises RecordedSettingError naming it: it was a crash)."""
    second = ports[1] if len(ports) > 1 else None

    def from_argv(flag: str) -> int | None:
        value = argv_value(argv, flag)
        if not value:
            return None
        try:
            return int(value)
        except ValueError:
            key = f"components.{name}.argv {flag}"
            hint = mend_component(op, name, "argv")
            raise RecordedSettingError(op, key, value, "a port number", hint=hint) from None

    if name == "router":
        prom = second or from_argv("--prometheus-port")
        return (port if prom is None else prom), None
    if name == "prefill":
        return port, (second or from_argv("--disaggregation-bootstrap-port"))
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
