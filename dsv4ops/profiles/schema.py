"""Declarative profile schema: every key, its type, default and what a valid value looks like.

The loader walks this tree twice: once per file for unknown keys (so the error points at the file
that has the typo), and once over the merged document for types and required keys. targets.yaml
is declared as pydantic models instead (profiles/target_spec.py), the pattern this file is to
follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv4ops.profiles import _flag_tables
from dsv4ops.profiles.buckets import MAX_BATCH_SIZE, MAX_BUCKETS
from dsv4ops.profiles.routers import any_policy
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind
from dsv4ops.settings import CanaryThresholds, ProbeSettings, declared
from dsv4ops.timings import STOP_GRACE_MAX_S, STOP_GRACE_MIN_S, STOP_GRACE_S

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Values SGLang 0.5.23's parser accepts (reference §1.1-1.2, dumped from the live parser).
TRANSFER_BACKENDS = ("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp")
KV_CACHE_DTYPES = (
    "auto",
    "fp8_e5m2",
    "fp8_e4m3",
    "mxfp8",
    "bf16",
    "bfloat16",
    "nvfp4",
    "fp4_mx_block16",
)
# What either router takes; rules.rule_router_kind names the one that lacks a value.
ROUTER_POLICIES = any_policy("policy")
REASONING_PARSERS: tuple[str, ...] = _flag_tables.SGLANG_SERVER_TABLE["--reasoning-parser"][2] or ()

MAX_GPU_ID = 255


def _stop_grace() -> Field:
    """`<component>.stop_grace_s`: recorded in the deployment, so a stop gives each process the
    grace it was deployed with; no part of the command line, so not of the commands hash."""
    return Field(
        "float",
        default=STOP_GRACE_S,
        minimum=STOP_GRACE_MIN_S,
        maximum=STOP_GRACE_MAX_S,
        help="seconds a stop waits for its graceful exit before SIGKILL (not in the commands)",
    )


MAX_RUNNING_REQUESTS = MAX_BATCH_SIZE


# Bounds every value gets (docs/profiles.md "What is refused"): far above any real profile, far
# below what would make a check, a message or a command line unbounded.
MAX_STRING_CHARS = 16 * 1024  # one argv word or env value; Linux allows 128 KiB (MAX_ARG_STRLEN)
MAX_ITEMS = 256  # items of a list or NAME: value mapping (extra_args, env, ...)

# What a string must look like (Field.text), beyond "no control characters", which every string
# except free text is checked for (a NUL cannot be passed to execve; a newline or an escape
# sequence in an argv word or env value breaks the printed command, the journal and the terminal).
TEXT_HELP = {
    "free": "text (newlines and tabs allowed)",
    "argv": "text without control characters",
    "nonempty": "a non-empty string without control characters",
    "name": "a name: visible characters only, no spaces",
    "endpoint": "a URL path starting with '/', without spaces",
}


@dataclass(frozen=True)
class Field:
    """One leaf key. `kind` is one of: str, int, float, bool, onoff, int_list, str_list,
    str_map, buckets. `minimum`/`maximum` bound a number or each item of an int_list; floats
    must also be finite. `max_items` bounds a list (default MAX_ITEMS); `text` is a TEXT_HELP
    key for each string (default "argv")."""

    kind: str
    default: object = None
    required: bool = False
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    nullable: bool = False
    help: str = ""
    maximum: float | None = None
    max_items: int | None = None
    text: str = "argv"


Schema = dict[str, "Field | Schema"]

_KIND_HELP = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "onoff": "on or off",
    "int_list": "a list of integers, e.g. [0, 1, 2, 3]",
    "str_list": "a list of strings, e.g. ['--flag', 'value']",
    "str_map": "a mapping of NAME: value strings",
    "buckets": "a list of ints, 'sglang-default', 'sglang-default:MAX', 'stepN' or 'stepN:LO-HI'",
}


def describe(f: Field) -> str:
    """What a valid value looks like, for error messages."""
    if f.choices:
        shown = (
            f.choices
            if len(f.choices) <= 10
            else (*f.choices[:8], f"... ({len(f.choices)} in all)")
        )
        text = "one of " + ", ".join(shown)
    else:
        text = _KIND_HELP[f.kind]
        bounds = _bounds(f)
        if bounds:
            text += f", each {bounds}" if f.kind == "int_list" else f" {bounds}"
    return text + (" (or null)" if f.nullable else "")


def _bounds(f: Field) -> str:
    if f.minimum is not None and f.maximum is not None:
        return f"from {f.minimum:g} to {f.maximum:g}"
    if f.minimum is not None:
        return f">= {f.minimum:g}"
    return f"<= {f.maximum:g}" if f.maximum is not None else ""


def section_schema(cls: type[DataclassInstance]) -> Schema:
    """The schema of a declared section (dsv4ops/settings.py): one Field per setting."""
    return {
        d.name: Field(
            d.kind,
            default=list(d.default) if isinstance(d.default, tuple) else d.default,
            nullable=d.nullable,
            minimum=d.bounds.minimum,
            maximum=d.bounds.maximum,
            max_items=d.bounds.max_items,
            choices=d.bounds.choices,
            help=d.bounds.doc,
        )
        for d in declared(cls)
    }


def _server(role: str, *, default_port: int) -> Schema:
    side: Schema = {
        "gpus": Field(
            "int_list",
            required=True,
            help="physical GPU ids, contiguous",
            minimum=0,
            maximum=MAX_GPU_ID,
            max_items=64,
        ),
        "tp": Field(
            "int", required=True, minimum=1, help="tensor parallel size (--tp-size) = len(gpus)"
        ),
        "port": Field(
            "int",
            default=default_port,
            minimum=1,
            maximum=65535,
            help="the server's HTTP port (the target's port_offset is added)",
        ),
        "transfer_backend": Field(
            "str",
            default="nixl",
            choices=TRANSFER_BACKENDS,
            help="KV transfer between the sides (--disaggregation-transfer-backend); both match",
        ),
        "page_size": Field(
            "int",
            default=256,
            minimum=1,
            maximum=1024,
            help="KV cache page (--page-size; DSV4: 256)",
        ),
        "kv_cache_dtype": Field(
            "str",
            default="fp8_e4m3",
            choices=KV_CACHE_DTYPES,
            help="--kv-cache-dtype; both sides match",
        ),
        # A fraction of GPU memory: SGLang's own default on the 96 GB box is about 0.89.
        "mem_fraction_static": Field(
            "float",
            nullable=True,
            minimum=0.05,
            maximum=0.99,
            help="share of GPU memory for weights and KV cache; null: SGLang's (~0.89 on the box)",
        ),
        # DSV4's default is 256 (reference §1.4); the request pool is allocated up front.
        "max_running_requests": Field(
            "int",
            nullable=True,
            minimum=1,
            maximum=MAX_RUNNING_REQUESTS,
            help="--max-running-requests; null: DSV4's 256",
        ),
        "extra_args": Field(
            "str_list", default=[], help="more SGLang arguments, checked against its parser"
        ),
        "env": Field("str_map", default={}, help="environment of the server process"),
        "stop_grace_s": _stop_grace(),
    }
    if role == "prefill":
        side["bootstrap_port"] = Field(
            "int",
            default=8998,
            minimum=1,
            maximum=65535,
            help="--disaggregation-bootstrap-port, where the decode meets the prefill",
        )
    return side


PROFILE_SCHEMA: Schema = {
    "schema_version": Field("int", required=True, help="the file format's version"),
    "extends": Field(
        "str", nullable=True, help="the profile this one inherits from: a name or a relative path"
    ),
    "description": Field("str", default="", text="free", help="what the profile is for"),
    "model": {
        "path": Field(
            "str", required=True, text="nonempty", help="the model SGLang loads (--model-path)"
        ),
        "served_name": Field(
            "str",
            nullable=True,
            text="name",
            help="the name clients ask for (--served-model-name); null: the path",
        ),
        "tool_call_parser": Field(
            "str", default="deepseekv4", nullable=True, help="--tool-call-parser; null: none"
        ),
        "reasoning_parser": Field(
            "str",
            default="deepseek-v4",
            nullable=True,
            choices=REASONING_PARSERS,
            help="--reasoning-parser; null: none",
        ),
        "trust_remote_code": Field("bool", default=True, help="--trust-remote-code"),
    },
    "prefill": _server("prefill", default_port=30000),
    "decode": _server("decode", default_port=30001),
    "router": {
        # Which router runs in front of the pair (dsv4ops/routerkind.py): the command, the flags
        # extra_args may hold and how dsv4ops talks to it follow from it.
        "kind": Field(
            "str",
            default=str(DEFAULT_ROUTER_KIND),
            choices=tuple(str(k) for k in RouterKind),
            help="which router runs in front of the pair",
        ),
        "port": Field(
            "int", default=8000, minimum=1, maximum=65535, help="the port clients send requests to"
        ),
        "prometheus_port": Field(
            "int", default=29000, minimum=1, maximum=65535, help="the router's Prometheus port"
        ),
        "policy": Field(
            "str",
            default="cache_aware",
            choices=ROUTER_POLICIES,
            help="--policy; the router kind's parser narrows the choices",
        ),
        # PD's own policy per side (both routers take them); unset, --policy serves both.
        "prefill_policy": Field(
            "str",
            nullable=True,
            choices=any_policy("prefill_policy"),
            help="--prefill-policy; null: policy",
        ),
        "decode_policy": Field(
            "str",
            nullable=True,
            choices=any_policy("decode_policy"),
            help="--decode-policy; null: policy",
        ),
        "health_check": {
            "endpoint": Field(
                "str", default="/health", text="endpoint", help="the path the router polls"
            ),
            "interval_secs": Field(
                "int", default=10, minimum=1, maximum=3600, help="seconds between checks"
            ),
            # Above SGLang's own 20 s health-generate wait (reference §3), so a busy but healthy
            # server is not marked dead by the router's 5 s default.
            "timeout_secs": Field(
                "int", default=30, minimum=1, maximum=3600, help="seconds a check may take"
            ),
            "failure_threshold": Field(
                "int", default=3, minimum=1, maximum=100, help="failed checks that mark it dead"
            ),
            "success_threshold": Field(
                "int", default=2, minimum=1, maximum=100, help="passed checks that revive it"
            ),
        },
        # Where the key the router requires lives on the operator's machine, never the key
        # (dsv4ops/apikey.py): one of env and file; neither, a router open to its port.
        "api_key": {
            "env": Field("str", nullable=True, text="name", help="an environment variable name"),
            "file": Field("str", nullable=True, text="nonempty", help="a file holding the key"),
        },
        "extra_args": Field(
            "str_list", default=[], help="more router arguments, checked against its parser"
        ),
        "env": Field("str_map", default={}, help="environment of the router process"),
        "stop_grace_s": _stop_grace(),
    },
    "flags": {
        "overlap_schedule": Field(
            "onoff", default=False, help="the decode's overlap scheduler (on: the wedge hazard)"
        ),
        "multi_stream_overlap": Field(
            "onoff",
            default=False,
            help="SGLANG_OPT_USE_MULTI_STREAM_OVERLAP (on: the tool-call corruption hazard)",
        ),
        "decode_buckets": Field(
            "buckets",
            default="sglang-default",
            max_items=MAX_BUCKETS,
            help="the decode's CUDA-graph batch sizes (--cuda-graph-bs-decode)",
        ),
    },
    "kernel_package": Field(
        "str", nullable=True, help="the kernel package the servers load: name@version, or empty"
    ),
    # Declared once, with its defaults, bounds and docs, in dsv4ops/settings.py.
    "canary": section_schema(CanaryThresholds),
    # What the deployed model can do with tools, declared (dsv4ops/settings.py ProbeSettings).
    "probe": section_schema(ProbeSettings),
}
