"""Semantic rules on a built Profile. Each rule reports errors and warnings to a sink
(problems.py: strict raises the first error, collecting records them all and skips values marked
unusable).

Rules that need a target (GPUs present, ports after the offset) live in target_rules.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dsv4ops.constants import MIN_SWEEP_LAW_LEVELS
from dsv4ops.profiles.bucket_rules import rule_buckets, rule_dsv4_context_length
from dsv4ops.profiles.excerpt import excerpt, printable_key
from dsv4ops.profiles.flags import check_server_args, option_value
from dsv4ops.profiles.kernel_rules import (
    KERNEL_PACKAGE_RE,
    rule_kernel_package_loadable,
    rule_sparse_decode_attn,
)
from dsv4ops.profiles.model import Profile, ProfileWarning
from dsv4ops.profiles.pd_timeouts import rule_pd_timeouts
from dsv4ops.profiles.problems import Problems, strict
from dsv4ops.profiles.profile_spec import SWITCHES
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.router_rules import rule_router

SGLANG_HEALTH_WAIT_S = 20  # SGLANG_HEALTH_CHECK_TIMEOUT default (http_server.py:218)

Rule = Callable[[Profile, Provenance, Problems], None]


def rule_gpus_match_tp(p: Profile, prov: Provenance, sink: Problems) -> None:
    for side in (p.prefill, p.decode):
        key = f"{side.role}.gpus"
        if not sink.usable(key):
            continue
        if not side.gpus:
            sink.error(prov, key, "at least one GPU is required")
            continue
        if len(set(side.gpus)) != len(side.gpus):
            sink.error(prov, key, f"GPU listed twice in {list(side.gpus)}")
            continue
        if sink.usable(f"{side.role}.tp") and len(side.gpus) != side.tp:
            sink.error(
                prov,
                f"{side.role}.tp",
                f"tp is {side.tp} but {side.role}.gpus lists {len(side.gpus)} GPU(s); "
                f"each TP rank needs exactly one GPU, so tp must be {len(side.gpus)}",
            )
        # Rendered as --base-gpu-id: SGLang then uses base, base+1, ... (gpu-id-step 1).
        expected = list(range(side.gpus[0], side.gpus[0] + len(side.gpus)))
        if list(side.gpus) != expected:
            sink.error(
                prov,
                key,
                f"GPUs must be contiguous and ascending (rendered as --base-gpu-id), got "
                f"{list(side.gpus)}; e.g. {expected}",
            )


def rule_gpus_disjoint(p: Profile, prov: Provenance, sink: Problems) -> None:
    if not sink.usable("prefill.gpus", "decode.gpus"):
        return
    shared = sorted(set(p.prefill.gpus) & set(p.decode.gpus))
    if shared:
        sink.error(
            prov,
            "decode.gpus",
            f"GPU(s) {shared} are also used by prefill; prefill and decode need disjoint GPUs",
        )


def profile_ports(p: Profile) -> list[tuple[str, int]]:
    return [
        ("prefill.port", p.prefill.port),
        ("prefill.bootstrap_port", p.bootstrap_port),
        ("decode.port", p.decode.port),
        ("router.port", p.router.port),
        ("router.prometheus_port", p.router.prometheus_port),
    ]


def rule_ports_distinct(p: Profile, prov: Provenance, sink: Problems) -> None:
    seen: dict[int, str] = {}
    for key, port in profile_ports(p):
        if not sink.usable(key):
            continue
        if in_ephemeral_range(port):
            # As for a shifted port (check_against_target): a client socket can hold it at any
            # time and make the server's bind fail now and then, so it is refused outright.
            low, high = EPHEMERAL_PORTS
            sink.error(
                prov,
                key,
                f"port {port} is in Linux's ephemeral port range ({low}-{high}), where a "
                f"client socket can hold it and make the bind fail; choose a port below {low}",
            )
            continue
        if port in seen:
            sink.error(
                prov,
                key,
                f"port {port} is already used by {seen[port]}; every port must be distinct",
            )
            continue
        seen[port] = key


def rule_kv_identical(p: Profile, prov: Provenance, sink: Problems) -> None:
    for attr in ("transfer_backend", "page_size", "kv_cache_dtype"):
        if not sink.usable(f"prefill.{attr}", f"decode.{attr}"):
            continue
        a, b = getattr(p.prefill, attr), getattr(p.decode, attr)
        if a != b:
            sink.error(
                prov,
                f"decode.{attr}",
                f"decode {attr} {b!r} differs from prefill {a!r}; the KV transfer needs them "
                "identical",
            )
    if not sink.usable("prefill.transfer_backend"):
        return
    if p.prefill.transfer_backend == "fake":
        sink.error(
            prov, "prefill.transfer_backend", "SGLang's prefill rejects the 'fake' transfer backend"
        )
        return
    if p.prefill.transfer_backend != "nixl":
        sink.warn(
            prov,
            "not-nixl",
            "prefill.transfer_backend",
            f"transfer backend {p.prefill.transfer_backend!r}: the box is set up for nixl "
            "(mooncake failed under sustained load, sglang#23272)",
        )


def rule_two_batch_overlap(p: Profile, prov: Provenance, sink: Problems) -> None:
    for side in (p.prefill, p.decode):
        args = side.extra_args
        if not sink.usable(f"{side.role}.extra_args") or "--enable-two-batch-overlap" not in args:
            continue
        a2a = option_value(args, "--moe-a2a-backend")
        size = option_value(args, "--attn-dp-size", "--attention-data-parallel-size")
        attn_dp = size is not None and size.isdigit() and int(size) > 1
        attn_dp = attn_dp or "--enable-dp-attention" in args
        if (a2a is None or a2a == "none") and not attn_dp:
            idx = args.index("--enable-two-batch-overlap")
            sink.error(
                prov,
                f"{side.role}.extra_args[{idx}]",
                "--enable-two-batch-overlap needs an MoE all-to-all backend (--moe-a2a-backend "
                "deepep, ...) or attention-DP (--attn-dp-size N); SGLang 0.5.23 raises "
                "ValueError at start-up otherwise",
            )


def rule_extra_args(p: Profile, prov: Provenance, sink: Problems) -> None:
    for side in (p.prefill, p.decode):
        if not sink.usable(f"{side.role}.extra_args"):
            continue
        for problem in check_server_args(side.extra_args, side.role):
            key = f"{side.role}.extra_args[{problem.index}]"
            if problem.is_error:
                sink.error(prov, key, problem.message)
            else:
                sink.warn(prov, "deprecated-flag", key, problem.message)


def rule_env(p: Profile, prov: Provenance, sink: Problems) -> None:
    for side in (p.prefill, p.decode):
        if not sink.usable(f"{side.role}.env"):
            continue
        for flag, switch in SWITCHES:  # an on/off flag's variable is the flag's to set
            if switch.env is not None and switch.env in side.env_dict:
                sink.error(prov, f"{side.role}.env.{switch.env}", f"set flags.{flag} instead")
        for name in side.env_dict:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                # located at the key's own line (a name holding '.' or '[' falls back to the
                # mapping's), named escaped and cut
                sink.error(
                    prov,
                    f"{side.role}.env.{printable_key(name)}",
                    f"{excerpt(name)} is not a valid environment variable name",
                )


def rule_hazards(p: Profile, prov: Provenance, sink: Problems) -> None:
    for flag, switch in SWITCHES:  # an on/off flag whose on is a known hazard warns of it
        key = f"flags.{flag}"
        if switch.warning is not None and sink.usable(key) and getattr(p.flags, flag):
            sink.warn(prov, switch.warning[0], key, switch.warning[1])
    timeout_key = "router.health_check.timeout_secs"
    if sink.usable(timeout_key) and p.router.health_check.timeout_secs <= SGLANG_HEALTH_WAIT_S:
        sink.warn(
            prov,
            "health-timeout-short",
            timeout_key,
            f"router health timeout {p.router.health_check.timeout_secs}s <= SGLang's own "
            f"{SGLANG_HEALTH_WAIT_S}s health wait: a busy server can be marked unhealthy",
        )


def rule_misc(p: Profile, prov: Provenance, sink: Problems) -> None:
    if (
        sink.usable("kernel_package")
        and p.kernel_package is not None
        and not KERNEL_PACKAGE_RE.match(p.kernel_package)
    ):
        sink.error(
            prov,
            "kernel_package",
            f"expected name@version (e.g. dsv4-decode@1.2.0) or empty, got "
            f"{excerpt(p.kernel_package)}",
        )
    levels = len(set(p.canary.sweep_concurrency))
    if sink.usable("canary.sweep_concurrency") and levels < MIN_SWEEP_LAW_LEVELS:
        sink.error(
            prov,
            "canary.sweep_concurrency",
            f"{levels} distinct level(s); the sweep needs at least {MIN_SWEEP_LAW_LEVELS} "
            "to fit a step law (a line through two fits them by construction)",
        )
    if sink.usable("canary.thinking") and p.canary.thinking and not p.model.reasoning_parser:
        # SGLang separates reasoning only with --reasoning-parser; without it the canary's
        # thinking requests would get the reasoning in `content`.
        sink.error(
            prov,
            "canary.thinking",
            "thinking needs model.reasoning_parser " "(deepseek-v4 for DSV4)",
        )


def rule_probe_tool_call_parser(p: Profile, prov: Provenance, sink: Problems) -> None:
    """The probe's tool-call check (probe.tool_call required or auto) passes only when SGLang
    parses the model's call into `tool_calls`, which it does only with --tool-call-parser."""
    if (
        sink.usable("probe.tool_call", "model.tool_call_parser")
        and p.probe.tool_call != "off"
        and not p.model.tool_call_parser
    ):
        sink.error(
            prov,
            "model.tool_call_parser",
            f"probe.tool_call is {p.probe.tool_call!r} but there is no tool-call parser: "
            "SGLang would return the call as text and the deploy's probe could never pass. "
            "Set model.tool_call_parser (deepseekv4 for DSV4), or probe.tool_call: off for "
            "a model that calls no tools",
        )


RULES: tuple[Rule, ...] = (
    rule_gpus_match_tp,
    rule_gpus_disjoint,
    rule_ports_distinct,
    rule_buckets,
    rule_dsv4_context_length,
    rule_kv_identical,
    rule_two_batch_overlap,
    rule_extra_args,
    rule_router,
    rule_env,
    rule_pd_timeouts,
    rule_hazards,
    rule_misc,
    rule_probe_tool_call_parser,
    rule_kernel_package_loadable,
    rule_sparse_decode_attn,
)


def check_profile(
    p: Profile, prov: Provenance, sink: Problems | None = None
) -> list[ProfileWarning]:
    """Run every target-independent rule; return their warnings. Without a sink, raise
    ProfileError at the first violation; with a collecting one, report every violation (skipping
    unusable values)."""
    sink = sink if sink is not None else strict()
    for rule in RULES:
        rule(p, prov, sink)
    return sink.warnings


# Linux's default net.ipv4.ip_local_port_range: source ports of outgoing connections. A constant,
# not read from /proc: rendering happens on the operator's machine, the ports bind on the target.
EPHEMERAL_PORTS = (32768, 60999)


def in_ephemeral_range(port: int) -> bool:
    return EPHEMERAL_PORTS[0] <= port <= EPHEMERAL_PORTS[1]
