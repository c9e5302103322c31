"""What SGLang 0.5.23 and the router (sglang-router 0.3.2 or SMG) accept in `extra_args`, and
what the profile owns.

Flag names come from `_flag_tables.py` and `_smg_flag_table.py`, extracted from the wheels by
tools/extract_flag_tables.py and tools/extract_smg_flag_table.py.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from dsv4ops.profiles import _flag_tables
from dsv4ops.profiles.excerpt import excerpt, key_excerpt
from dsv4ops.profiles.profile_spec import SWITCHES
from dsv4ops.profiles.routers import FlagTable, router_table
from dsv4ops.routerkind import DEFAULT_ROUTER_KIND, RouterKind
from dsv4ops.secrets import redact_argv, redact_text

# Removed in 0.5.23: argparse prefix matching turns them into "ambiguous option" (exit 2).
REMOVED_SERVER_FLAGS = {
    "--cuda-graph-bs": "--cuda-graph-bs-decode (set flags.decode_buckets instead)",
    "--cuda-graph-max-bs": "--cuda-graph-max-bs-decode (or set flags.decode_buckets)",
}

# Still parsed, with a deprecation warning (server_args.py:410-425).
DEPRECATED_SERVER_FLAGS = {
    "--disable-cuda-graph": "--disable-decode-cuda-graph / --disable-prefill-cuda-graph",
    "--enable-dp-attention": "--attn-dp-size N",
}

# Flags the renderer sets from profile keys; in extra_args they would fight the profile.
MANAGED_SERVER_FLAGS = {
    "--model-path": "model.path",
    "--model": "model.path",
    "--served-model-name": "model.served_name",
    "--tool-call-parser": "model.tool_call_parser",
    "--reasoning-parser": "model.reasoning_parser",
    "--trust-remote-code": "model.trust_remote_code",
    "--tp-size": "<side>.tp",
    "--tensor-parallel-size": "<side>.tp",
    "--tp": "<side>.tp",
    "--base-gpu-id": "<side>.gpus",
    "--host": "the target's bind_host",
    "--port": "<side>.port",
    "--disaggregation-mode": "the component (prefill/decode)",
    "--disaggregation-transfer-backend": "<side>.transfer_backend",
    "--disaggregation-bootstrap-port": "prefill.bootstrap_port",
    "--page-size": "<side>.page_size",
    "--kv-cache-dtype": "<side>.kv_cache_dtype",
    "--mem-fraction-static": "<side>.mem_fraction_static",
    "--max-running-requests": "<side>.max_running_requests",
    "--cuda-graph-bs-decode": "flags.decode_buckets",
    # each on/off flag's own arguments (profile_spec.SWITCHES), as its declaration says
    **{
        arg: f"flags.{flag} ({'/'.join(switch.sides)})"
        for flag, switch in SWITCHES
        for arg in (*switch.argv_on, *switch.argv_off)
    },
    "--enable-metrics": "always on",
}

MANAGED_ROUTER_FLAGS = {
    "--pd-disaggregation": "always on",
    "--prefill": "the profile's prefill server",
    "--decode": "the profile's decode server",
    "--host": "the target's bind_host",
    "--port": "router.port",
    "--prometheus-port": "router.prometheus_port",
    "--prometheus-host": "the target's bind_host",
    "--policy": "router.policy",
    "--prefill-policy": "router.prefill_policy",
    "--decode-policy": "router.decode_policy",
    "--health-check-endpoint": "router.health_check.endpoint",
    "--health-check-interval-secs": "router.health_check.interval_secs",
    "--health-check-timeout-secs": "router.health_check.timeout_secs",
    "--health-failure-threshold": "router.health_check.failure_threshold",
    "--health-success-threshold": "router.health_check.success_threshold",
    # A key written here would be committed to git and shown by `profile show`.
    "--api-key": "router.api_key (env NAME or file PATH: where the key lives, never the key)",
}


@dataclass(frozen=True)
class FlagProblem:
    index: int  # position in extra_args
    flag: str
    message: str
    is_error: bool

    def __post_init__(self) -> None:
        # Messages quote what the user wrote: `"--api-key sekr1t"` as one item, say. Whatever
        # built them, no secret value leaves here (dsv4ops/secrets.py's text rule).
        object.__setattr__(self, "message", redact_text(self.message))
        object.__setattr__(self, "flag", redact_text(self.flag))


def _options(args: Sequence[str]) -> list[tuple[int, str]]:
    out = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            out.append((i, arg.split("=", 1)[0]))
    return out


# argparse reads a token that looks like a negative number as a value, not an option, when the
# parser has no option that looks like one (SGLang's and the router's have none).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _is_value(arg: str) -> bool:
    return not arg.startswith("-") or bool(_NEGATIVE_NUMBER.match(arg))


def _stray_args(args: Sequence[str], table: FlagTable, program: str) -> list[FlagProblem]:
    """Tokens no option consumes, and options missing their value, walked the way argparse does
    (nargs from the flag table): SGLang would exit 2 with 'unrecognized arguments' or 'expected
    one argument'. An unknown flag is reported elsewhere; it is assumed to take any values."""
    problems: list[FlagProblem] = []
    known = frozenset(table)
    shown = redact_argv(args)  # `--api-key=` then the value: the value is quoted as ***
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("--") and not _NEGATIVE_NUMBER.match(arg):
            if arg.startswith("-") and arg != "--":
                msg = f"{excerpt(shown[i], limit=60)} is not an option {program} accepts (options start with --)"
            else:
                msg = (
                    f"{excerpt(shown[i], limit=60)} is not a flag and no flag before it takes a value; "
                    f"{program} would exit with 'unrecognized arguments'"
                )
            problems.append(FlagProblem(i, shown[i], msg, True))
            i += 1
            continue
        if _NEGATIVE_NUMBER.match(arg):
            problems.append(FlagProblem(i, arg, f"{arg} follows no flag that takes a value", True))
            i += 1
            continue
        name, eq, _ = arg.partition("=")
        full, _ = _match(name, known)
        nargs = table[full][0] if full is not None else "*"
        i += 1
        if eq or nargs == 0:
            continue
        if nargs in (1, "+") and (i >= len(args) or not _is_value(args[i])):
            problems.append(FlagProblem(i - 1, name, f"{full} expects a value", True))
            continue
        if nargs in (1, "?"):
            i += 1 if i < len(args) and _is_value(args[i]) else 0
            continue
        while i < len(args) and _is_value(args[i]):  # "+", "*" and unknown flags
            i += 1
    return problems


def _match(flag: str, known: frozenset[str]) -> tuple[str | None, list[str]]:
    """Resolve like argparse (allow_abbrev): exact, else a unique prefix; else ambiguity list."""
    if flag in known:
        return flag, []
    hits = sorted(k for k in known if k.startswith(flag))
    if len(hits) == 1:
        return hits[0], []
    return None, hits


def check_server_args(args: Sequence[str], side: str) -> list[FlagProblem]:
    """Problems with a server's extra_args (removed, ambiguous, unknown, managed, deprecated)."""
    return _check_args(args, _flag_tables.SGLANG_SERVER_TABLE, MANAGED_SERVER_FLAGS, side, None)


def check_router_args(
    args: Sequence[str], kind: RouterKind = DEFAULT_ROUTER_KIND
) -> list[FlagProblem]:
    """Problems with the router's extra_args (unknown or managed flags) for the router the
    profile runs; a flag only the other router takes says so (the operator may have meant it)."""
    return _check_args(args, router_table(kind), MANAGED_ROUTER_FLAGS, "", kind)


def _check_args(
    args: Sequence[str],
    table: FlagTable,
    managed: dict[str, str],
    side: str,
    kind: RouterKind | None,  # None: an SGLang server's
) -> list[FlagProblem]:
    label = _SGLANG if kind is None else kind.label
    known = frozenset(table)
    problems = _stray_args(args, table, label)
    for i, flag in _options(args):
        if kind is None and flag in REMOVED_SERVER_FLAGS:
            why = f"{flag} was removed in {_SGLANG}; use {REMOVED_SERVER_FLAGS[flag]}"
            problems.append(FlagProblem(i, flag, why, True))
            continue
        full, ambiguous = _match(flag, known)
        if full is None:
            problems.append(FlagProblem(i, flag, _unknown_flag(flag, kind, ambiguous, known), True))
        elif full in managed:
            key = managed[full].replace("<side>", side)
            why = f"{full} is set by the profile ({key}); set it there"
            problems.append(FlagProblem(i, flag, why, True))
        elif kind is None and full in DEPRECATED_SERVER_FLAGS:
            why = f"{full} is deprecated in {_SGLANG}; use {DEPRECATED_SERVER_FLAGS[full]}"
            problems.append(FlagProblem(i, flag, why, False))
    return problems


_SGLANG = "SGLang 0.5.23"


def _unknown_flag(
    flag: str, kind: RouterKind | None, ambiguous: list[str], known: frozenset[str]
) -> str:
    label, shown = (_SGLANG if kind is None else kind.label), key_excerpt(flag, 80)
    if ambiguous:
        return f"{shown} is ambiguous for {label} (could be {', '.join(ambiguous[:4])})"
    if kind is not None and flag in router_table(kind.other):
        other = kind.other
        return (
            f"{flag} is an option of {other.label} that {kind.label} lacks "
            f"(router.kind: {kind} runs {kind.label}; router.kind: {other} runs {other.label})"
        )
    close = difflib.get_close_matches(flag[:80], sorted(known), n=1)
    what = f"an {label}" if kind is None else f"a {label}"
    return f"{shown} is not {what} flag" + (f"; did you mean {close[0]}?" if close else "")


def option_value(args: Sequence[str], *names: str) -> str | None:
    """The value of the last `--name V` / `--name=V` among args (None if absent)."""
    value = None
    for i, arg in enumerate(args):
        head, eq, tail = arg.partition("=")
        if head in names:
            if eq:
                value = tail
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                value = args[i + 1]
            else:
                value = ""
    return value


def context_length(args: Sequence[str]) -> int | None:
    """A server's explicit `--context-length` (None when absent or not a positive integer, which
    SGLang's argparse would refuse anyway: the flag-table check reports that)."""
    value = option_value(args, "--context-length")
    return int(value) if value is not None and value.isdigit() and int(value) > 0 else None
