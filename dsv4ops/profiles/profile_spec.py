"""The profile declared once, as frozen pydantic models: every key with its type, default, bounds
and doc (as targets.yaml is in profiles/target_spec.py; the types of the keys are schema.py's).

The loader checks the merged document against these models key by key (typecheck.normalize:
each value validated by its field, every problem named `file:line: key: why`, a bad value marked
unusable so the rules still run on the rest) and assembles the typed `ProfileSpec` the Profile is
built from (build.py). The unknown-key check walks them; the JSON Schema and docs/profiles.md's
tables are their `model_json_schema` (json_schema.py, reference.py).

The `canary` and `probe` sections are declared in dsv4ops/settings.py, below the deployment
that carries them: their keys here are those models themselves.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, TypeVar

from annotated_types import MaxLen
from pydantic import BaseModel, Discriminator, Tag
from pydantic import Field as Key

from dsv4ops.deployment import served_model_name
from dsv4ops.profiles.buckets import MAX_BUCKETS
from dsv4ops.profiles.routers import any_policy
from dsv4ops.profiles.schema import (
    KV_CACHE_DTYPES,
    MAX_ITEMS,
    MAX_RUNNING_REQUESTS,
    REASONING_PARSERS,
    ROUTER_POLICIES,
    TRANSFER_BACKENDS,
    ArgvList,
    ArgvText,
    EndpointText,
    EnvMap,
    FreeText,
    GpuIds,
    Kind,
    NameText,
    NonEmptyText,
    OnOff,
    Section,
    section_of,
)
from dsv4ops.profiles.switch import Switch
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind
from dsv4ops.settings import CanaryThresholds, ProbeSettings
from dsv4ops.timings import STOP_GRACE_MAX_S, STOP_GRACE_MIN_S, STOP_GRACE_S

M = TypeVar("M", bound=BaseModel)


def _spec_or_list(value: object) -> str:
    return "spec" if isinstance(value, str) else "list"


# An explicit list, or a spec string that buckets.resolve_buckets resolves (and bounds).
Buckets = Annotated[
    Annotated[list[int], Tag("list"), MaxLen(MAX_BUCKETS)] | Annotated[str, Tag("spec")],
    Kind("buckets"),
    Discriminator(_spec_or_list),
]
ReasoningParser = Annotated[str, Kind("str", choices=REASONING_PARSERS)]
TransferBackend = Annotated[str, Kind("str", choices=TRANSFER_BACKENDS)]
KvCacheDtype = Annotated[str, Kind("str", choices=KV_CACHE_DTYPES)]
RouterKindName = Annotated[str, Kind("str", choices=tuple(str(k) for k in RouterKind))]
Policy = Annotated[str, Kind("str", choices=ROUTER_POLICIES)]
PrefillPolicy = Annotated[str, Kind("str", choices=any_policy("prefill_policy"))]
DecodePolicy = Annotated[str, Kind("str", choices=any_policy("decode_policy"))]


def _stop_grace() -> float:
    """`<component>.stop_grace_s`: recorded in the deployment, so a stop gives each process the
    grace it was deployed with; no part of the command line, so not of the commands hash."""
    return Key(
        STOP_GRACE_S,
        ge=STOP_GRACE_MIN_S,
        le=STOP_GRACE_MAX_S,
        description="seconds a stop waits for its graceful exit before SIGKILL (not in the commands)",
    )


class ModelSection(Section):
    path: NonEmptyText = Key(description="the model SGLang loads (--model-path)")
    served_name: NameText | None = Key(
        None, description="the name clients ask for (--served-model-name); null: the path"
    )
    tool_call_parser: ArgvText | None = Key(
        "deepseekv4", description="--tool-call-parser; null: none"
    )
    reasoning_parser: ReasoningParser | None = Key(
        "deepseek-v4", description="--reasoning-parser; null: none"
    )
    trust_remote_code: bool = Key(True, description="--trust-remote-code")

    @property
    def request_name(self) -> str:
        """The model name requests carry (the one rule: dsv4ops.deployment.served_model_name)."""
        return served_model_name(self.served_name, self.path)


class DecodeSection(Section):
    """One SGLang server of the PD pair; the prefill's adds its bootstrap port."""

    # The side's name: its key in the profile, its component and its flag tables (the loaded
    # Profile holds both sections as they are: profiles/model.py ServerSpec).
    role: ClassVar[str] = "decode"

    gpus: GpuIds = Key(max_length=64, description="physical GPU ids, contiguous")
    tp: int = Key(ge=1, description="tensor parallel size (--tp-size) = len(gpus)")
    port: int = Key(
        30001,
        ge=1,
        le=65535,
        description="the server's HTTP port (the target's port_offset is added)",
    )
    transfer_backend: TransferBackend = Key(
        "nixl",
        description="KV transfer between the sides (--disaggregation-transfer-backend); both match",
    )
    page_size: int = Key(256, ge=1, le=1024, description="KV cache page (--page-size; DSV4: 256)")
    kv_cache_dtype: KvCacheDtype = Key("fp8_e4m3", description="--kv-cache-dtype; both sides match")
    # A fraction of GPU memory: SGLang's own default on the 96 GB box is about 0.89.
    mem_fraction_static: float | None = Key(
        None,
        ge=0.05,
        le=0.99,
        description="share of GPU memory for weights and KV cache; null: SGLang's (~0.89 on the box)",
    )
    # DSV4's default is 256 (reference §1.4); the request pool is allocated up front.
    max_running_requests: int | None = Key(
        None, ge=1, le=MAX_RUNNING_REQUESTS, description="--max-running-requests; null: DSV4's 256"
    )
    extra_args: ArgvList = Key(
        [], max_length=MAX_ITEMS, description="more SGLang arguments, checked against its parser"
    )
    env: EnvMap = Key({}, max_length=MAX_ITEMS, description="environment of the server process")
    stop_grace_s: float = _stop_grace()

    @property
    def env_dict(self) -> dict[str, str]:
        """The environment, sorted by name (the order the rendered command holds it in)."""
        return dict(sorted(self.env.items()))


class PrefillSection(DecodeSection):
    role: ClassVar[str] = "prefill"

    port: int = Key(
        30000,
        ge=1,
        le=65535,
        description="the server's HTTP port (the target's port_offset is added)",
    )
    bootstrap_port: int = Key(
        8998,
        ge=1,
        le=65535,
        description="--disaggregation-bootstrap-port, where the decode meets the prefill",
    )


class HealthCheckSection(Section):
    endpoint: EndpointText = Key("/health", description="the path the router polls")
    interval_secs: int = Key(10, ge=1, le=3600, description="seconds between checks")
    # Above SGLang's own 20 s health-generate wait (reference §3), so a busy but healthy server
    # is not marked dead by the router's 5 s default.
    timeout_secs: int = Key(30, ge=1, le=3600, description="seconds a check may take")
    failure_threshold: int = Key(3, ge=1, le=100, description="failed checks that mark it dead")
    success_threshold: int = Key(2, ge=1, le=100, description="passed checks that revive it")


class ApiKeySection(Section):
    """Where the key the router requires lives on the operator's machine, never the key
    (dsv4ops/apikey.py): one of env and file; neither, a router open to its port."""

    env: NameText | None = Key(None, description="an environment variable name")
    file: NonEmptyText | None = Key(None, description="a file holding the key")


class RouterSection(Section):
    # Which router runs in front of the pair (dsv4ops/routerkind.py): the command, the flags
    # extra_args may hold and how dsv4ops talks to it follow from it.
    kind: RouterKindName = Key(
        str(DEFAULT_ROUTER_KIND), description="which router runs in front of the pair"
    )
    port: int = Key(8000, ge=1, le=65535, description="the port clients send requests to")
    prometheus_port: int = Key(29000, ge=1, le=65535, description="the router's Prometheus port")
    policy: Policy = Key(
        "cache_aware", description="--policy; the router kind's parser narrows the choices"
    )
    # PD's own policy per side (both routers take them); unset, --policy serves both.
    prefill_policy: PrefillPolicy | None = Key(None, description="--prefill-policy; null: policy")
    decode_policy: DecodePolicy | None = Key(None, description="--decode-policy; null: policy")
    health_check: HealthCheckSection = Key(default_factory=HealthCheckSection)
    api_key: ApiKeySection = Key(default_factory=ApiKeySection)
    extra_args: ArgvList = Key(
        [], max_length=MAX_ITEMS, description="more router arguments, checked against its parser"
    )
    env: EnvMap = Key({}, max_length=MAX_ITEMS, description="environment of the router process")
    stop_grace_s: float = _stop_grace()

    @property
    def router_kind(self) -> RouterKind:
        return RouterKind(self.kind)

    @property
    def env_dict(self) -> dict[str, str]:
        """The environment, sorted by name (the order the rendered command holds it in)."""
        return dict(sorted(self.env.items()))


# Each on/off flag is declared once, here: the field (type, default, doc: the schema and the docs
# table) and its `Switch`; render, views, toggles, rules, flags and the canary's gate read
# `SWITCHES`, never a flag by name. A typed Annotated marker rather than `json_schema_extra`:
# mypy checks each declaration, and nothing of it leaks into the shipped JSON Schema.
class FlagsSection(Section):
    overlap_schedule: Annotated[
        OnOff,
        Switch(
            toggle="overlap",
            column="overlap",
            # The TP-desync wedge is a decode-loop hazard (seed A/B toggled the decode only);
            # the prefill keeps SGLang's default scheduler.
            sides=("decode",),
            argv_off=("--disable-overlap-schedule",),
            suite="abort-cascade",
            warning=(
                "overlap-schedule-wedge",
                "overlap scheduler on: +5-7% throughput in the seed A/B, but the TP-desync wedge "
                "reproduced under abort cascades (decode hangs silently)",
            ),
            on_words="overlap on: +5-7% throughput in the seed measurements, TP-desync wedge "
            "hazard under abort cascades",
            off_words="overlap off: the safe setting; gives up ~5-7% throughput, removes the "
            "TP-desync wedge hazard",
        ),
    ] = Key(False, description="the decode's overlap scheduler (on: the wedge hazard)")
    multi_stream_overlap: Annotated[
        OnOff,
        Switch(
            toggle="multi-stream-overlap",
            column="multi_stream",
            # Gates the DSV4 alt-stream overlap in CUDA-graph capture (the tool-call corruption
            # race). Set on both sides: decode is where it matters, on prefill it is harmless
            # and keeps them alike.
            sides=("prefill", "decode"),
            env="SGLANG_OPT_USE_MULTI_STREAM_OVERLAP",
            suite="corruption",
            warning=(
                "multi-stream-corruption",
                "multi-stream overlap on: the CUDA-graph capture race corrupted tool calls at high "
                "concurrency; SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0 fixed it",
            ),
            on_words="multi-stream overlap on: tool-call corruption at high concurrency in the "
            "seeds (CUDA-graph capture race)",
            off_words="multi-stream overlap off: the fix for high-concurrency tool-call "
            "corruption (no code change)",
        ),
    ] = Key(
        False,
        description="SGLANG_OPT_USE_MULTI_STREAM_OVERLAP (on: the tool-call corruption hazard)",
    )
    # Not on/off: a spec or a list, resolved against the decode (build.py, Profile.decode_buckets).
    decode_buckets: Buckets = Key(
        "sglang-default",
        description="the decode's CUDA-graph batch sizes (--cuda-graph-bs-decode)",
    )


# (key, Switch) of each on/off flag, in declaration order.
SWITCHES: tuple[tuple[str, Switch], ...] = tuple(
    (name, mark)
    for name, info in FlagsSection.model_fields.items()
    for mark in info.metadata
    if isinstance(mark, Switch)
)


class ProfileSpec(Section):
    """One profile after `extends` (the loader checks schema_version first, alone)."""

    schema_version: int = Key(description="the file format's version")
    extends: ArgvText | None = Key(
        None, description="the profile this one inherits from: a name or a relative path"
    )
    description: FreeText = Key("", description="what the profile is for")
    model: ModelSection
    prefill: PrefillSection
    decode: DecodeSection
    router: RouterSection = Key(default_factory=RouterSection)
    flags: FlagsSection = Key(default_factory=FlagsSection)
    kernel_package: ArgvText | None = Key(
        None, description="the kernel package the servers load: name@version, or empty"
    )
    # Declared once, with its defaults, bounds and docs, in dsv4ops/settings.py.
    canary: CanaryThresholds = Key(default_factory=CanaryThresholds)
    # What the deployed model can do with tools, declared (dsv4ops/settings.py ProbeSettings).
    probe: ProbeSettings = Key(default_factory=ProbeSettings)


def construct(model: type[M], values: dict[str, object]) -> M:
    """The model of values each already validated by its key (typecheck.normalize), placeholders
    in place of the bad ones: nothing is validated twice, and a bad key still yields a model."""
    fields: dict[str, object] = {}
    for key, info in model.model_fields.items():
        section = section_of(info)
        value = values[key]
        fields[key] = construct(section, value) if section is not None else value  # type: ignore[arg-type]
    return model.model_construct(None, **fields)
