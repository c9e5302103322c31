"""targets.yaml declared once, as frozen pydantic models: every key of a target with its type,
default, bounds and doc, and the rules on one target (a distinct GPU list, an SSH target's host,
an endpoint's URLs). The loader (profiles/targets.py) validates the YAML against `TargetsFile`
and names each problem by file:line; the JSON Schema (profiles/json_schema.py) and the settings
tables of docs/profiles.md (profiles/reference.py) are derived from these models."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from dsv4ops.constants import SSH_RECONNECT_S
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.schema import (
    MAX_ITEMS,
    ArgvText,
    EnvMap,
    FreeText,
    GpuIds,
    NameText,
    Section,
)
from dsv4ops.urls import Flaw, check_http_url

# Settings of a target whose processes dsv4ops starts: meaningless for a cluster, whose
# controller runs the pods. Refused by name rather than as unknown keys, so the message says why.
PROCESS_KEYS = (
    "ssh",
    "gpus",
    "workdir",
    "python",
    "launcher",
    "bind_host",
    "connect_host",
    "port_offset",
    "twin_env",
)


def problem(why: str, *, at: str | None = None, hint: str | None = None) -> PydanticCustomError:
    """A refusal of ours: `why` verbatim (never the value: a URL may hold a password), `at` a key
    under the one validated, `hint` the loader's hint (targets.py reads them back)."""
    context: dict[str, str] = {"why": why}
    if at is not None:
        context["at"] = at
    if hint is not None:
        context["hint"] = hint
    return PydanticCustomError("dsv4ops", "{why}", context)


def _empty_is_null(value: object) -> object:
    return None if value == "" else value


# A nullable argv string: "" is null, as the hand-written loader read it.
OptionalArgv = Annotated[ArgvText | None, BeforeValidator(_empty_is_null)]


def check_url(url: str) -> str:
    """A server's base URL, `http(s)://host[:port]` (no path: the callers append /metrics,
    /readiness ...); returned without a trailing '/'."""
    checked = check_http_url(url)
    if checked.parts is None:
        raise problem(f"not a URL ({checked.detail}): {excerpt(url)}")
    parts = checked.parts
    if checked.flaw in (Flaw.NOT_HTTP, Flaw.NO_HOST):
        raise problem(f"expected http://host[:port] or https://host[:port], got {excerpt(url)}")
    if parts.username is not None or parts.password is not None:
        # It would be printed, journaled and sent in every report: no credentials in a URL.
        raise problem(
            "a URL with credentials (user:password@) is refused: it would be printed and "
            "written to reports"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise problem(
            f"expected the server's base URL without a path, got {excerpt(url)}",
            hint="/metrics, /readiness ... are appended",
        )
    if checked.flaw is Flaw.PORT_ZERO:
        raise problem(f"port 0 is not a port to connect to: {excerpt(url)}")
    return f"{parts.scheme}://{parts.netloc}"


Url = Annotated[NameText, AfterValidator(check_url)]


class Spec(Section):
    """A mapping of targets.yaml (a quoted "22" is not a port); a key written as null takes its
    default."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {
            k: v
            for k, v in data.items()
            if not (v is None and k in fields and not fields[k].is_required())
        }


class SSHFields(Spec):
    host: OptionalArgv = Field(None, description="the host to connect to (transport: ssh)")
    port: int = Field(22, ge=1, le=65535, description="the SSH port")
    user: OptionalArgv = Field(None, description="the login; null: SSH's default")
    key: OptionalArgv = Field(None, description="a private key file; null: SSH's defaults")
    known_hosts: OptionalArgv = Field(None, description="the known_hosts file host keys are in")
    trust_on_first_use: bool = Field(
        False, description="accept an unknown host key once and record it"
    )
    reconnect_s: float = Field(
        SSH_RECONNECT_S,
        ge=0,
        le=600,
        description="seconds a call rides out a dropped connection (0: fail at once)",
    )


class BoxTarget(Spec):
    """A machine whose processes dsv4ops starts: this one (`local`) or one over SSH."""

    description: FreeText = Field("", description="what the target is")
    transport: Literal["local", "ssh"] = Field(
        description="this machine, a machine over SSH (or `endpoint`: a cluster's router)"
    )
    ssh: SSHFields = Field(default_factory=SSHFields, description="how to reach an ssh target")
    gpus: GpuIds = Field(max_length=64, description="the GPU ids the target has (distinct)")
    workdir: ArgvText = Field(description="where the components run and log")
    python: OptionalArgv = Field(
        None, description="interpreter on the target; null: this one (local), python3 (ssh)"
    )
    # SMG has its own venv (Makefile SMG_VENV): it cannot share sglang-router 0.3.2's.
    smg_python: OptionalArgv = Field(
        None,
        description="interpreter with smg installed; null: this machine's SMG venv (local), "
        "`python` (ssh)",
    )
    launcher: Literal["sglang", "twin"] = Field("sglang", description="real SGLang or the twin")
    bind_host: ArgvText = Field("127.0.0.1", description="the address the servers listen on")
    connect_host: OptionalArgv = Field(
        None, description="the address this machine calls; null: from bind_host"
    )
    port_offset: int = Field(0, ge=0, le=65535, description="added to every port of the profile")
    twin_env: EnvMap = Field(
        {},
        max_length=MAX_ITEMS,
        description="environment of the twin's processes",
    )

    @field_validator("gpus")
    @classmethod
    def _distinct(cls, gpus: list[int]) -> list[int]:
        if len(set(gpus)) != len(gpus):
            raise problem(f"expected distinct GPU ids, got {gpus}")
        return gpus

    @model_validator(mode="after")
    def _ssh_host(self) -> BoxTarget:
        if self.transport == "ssh" and not self.ssh.host:
            raise problem("an ssh target needs ssh.host", at="ssh.host")
        return self


class MetricsFields(Spec):
    prefill: list[Url] = Field([], max_length=64, description="prefill server URLs")
    decode: list[Url] = Field([], max_length=64, description="decode server URLs")
    router: Url | None = Field(None, description="the router's Prometheus URL")


class EndpointTarget(Spec):
    """A cluster (RBG) reached only over HTTP; dsv4ops starts nothing there."""

    description: FreeText = Field("", description="what the target is")
    transport: Literal["endpoint"] = Field(description="a cluster's router over HTTP")
    router_url: Url = Field(description="http(s)://host[:port]")
    metrics: MetricsFields = Field(
        default_factory=MetricsFields, description="the servers' Prometheus URLs"
    )
    profile: NameText | None = Field(None, description="the profile the cluster runs")
    namespace: NameText | None = Field(None, description="the cluster's namespace")
    replicas: int | None = Field(None, ge=1, le=64, description="prefill:decode pairs")


AnyTarget = Annotated[BoxTarget | EndpointTarget, Field(discriminator="transport")]


class TargetsFile(Spec):
    """targets.yaml (its schema_version is checked first, alone, by the loader)."""

    schema_version: int = Field(description="the file format's version")
    targets: dict[ArgvText, AnyTarget] = Field(
        min_length=1, description="target name -> where and how a profile runs"
    )

    @field_validator("targets", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        # A name YAML reads as a number (`5:`) is still a name.
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value
