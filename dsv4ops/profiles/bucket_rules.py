"""The decode CUDA-graph rules (in rules.RULES): the buckets (sizes positive, increasing,
bounded, and matching the decode's max running requests) and the DSV4 decode's context length,
which sets its graph width."""

from __future__ import annotations

from dsv4ops.profiles.buckets import MAX_BATCH_SIZE, MAX_BUCKETS
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.flags import context_length
from dsv4ops.profiles.model import ModelSpec, Profile
from dsv4ops.profiles.problems import Problems
from dsv4ops.profiles.provenance import Provenance

# SGLang's DSV4 default when --max-running-requests is unset (deepseek_v4_hook.py:138-146).
DSV4_DEFAULT_MAX_RUNNING = 256


def rule_buckets(p: Profile, prov: Provenance, sink: Problems) -> None:
    key = "flags.decode_buckets"
    if not sink.usable(key):
        return
    buckets = p.decode_buckets
    if not buckets:
        sink.error(prov, key, "the bucket list is empty; expected at least one batch size")
        return
    if len(buckets) > MAX_BUCKETS:
        sink.error(
            prov,
            key,
            f"{len(buckets)} decode buckets; at most {MAX_BUCKETS} (each is a CUDA graph)",
        )
        return
    ok = True
    for i, bs in enumerate(buckets):
        if bs < 1:
            sink.error(prov, f"{key}[{i}]", f"batch size {bs} must be positive")
            ok = False
        elif bs > MAX_BATCH_SIZE:
            sink.error(prov, f"{key}[{i}]", f"batch size {excerpt(bs)} is above {MAX_BATCH_SIZE}")
            ok = False
        elif i and bs <= buckets[i - 1]:
            sink.error(
                prov,
                f"{key}[{i}]",
                f"buckets must be strictly increasing; {bs} follows {buckets[i - 1]}",
            )
            ok = False
    if not ok or not sink.usable("decode.max_running_requests"):
        return
    running = p.decode.max_running_requests or DSV4_DEFAULT_MAX_RUNNING
    if _explicit_max(p.flags.decode_buckets) and buckets[-1] > running:
        # SGLang drops captured sizes above its request pool (reference §1.4 step 3): the graphs
        # cost memory and start-up time and are never used; the profile asked for something else.
        where = f"{key}[{len(buckets) - 1}]" if not isinstance(p.flags.decode_buckets, str) else key
        source = (
            "decode.max_running_requests" if p.decode.max_running_requests else "DSV4's default"
        )
        sink.error(
            prov,
            where,
            f"largest decode bucket {buckets[-1]} is above max running requests {running} "
            f"({source}): SGLang never runs a batch that large, and drops the CUDA graph",
            hint="lower the buckets, or raise decode.max_running_requests",
        )
        return
    if buckets[-1] < running:
        sink.warn(
            prov,
            "buckets-below-max-running",
            key,
            f"largest decode bucket {buckets[-1]} < max running requests {running}: batches above "
            f"{buckets[-1]} run without a CUDA graph (eager, much slower steps)",
        )


def _explicit_max(spec: str | list[int]) -> bool:
    """True when the spec names its largest size (a list, `sglang-default:MAX`, `stepN:LO-HI`);
    the bare specs follow SGLang's own max, which it clamps itself."""
    return not isinstance(spec, str) or ":" in spec


def is_dsv4(model: ModelSpec) -> bool:
    """A DeepSeek-V4 model: its path names it, or its parsers are DSV4's."""
    return (
        "deepseek-v4" in model.path.lower()
        or (model.tool_call_parser or "").startswith("deepseekv4")
        or (model.reasoning_parser or "").startswith("deepseek-v4")
    )


def rule_dsv4_context_length(p: Profile, prov: Provenance, sink: Problems) -> None:
    """Without --context-length SGLang sizes the DSV4 decode for the model's whole 1M context, and
    its decode graph width follows that: 131072 gave 2.68x the decode throughput (sglang#40442).
    A warning, not an error: the context an operator needs is theirs to choose."""
    key = "decode.extra_args"
    if not sink.usable(key, "model.path") or not is_dsv4(p.model):
        return
    if context_length(p.decode.extra_args) is not None:
        return
    sink.warn(
        prov,
        "dsv4-context-length-unset",
        key,
        "the DSV4 decode has no explicit --context-length: SGLang sizes it for the model's "
        "1M context and the decode graph width follows it (sglang#40442: 131072 instead "
        "of 1M gave 2.68x decode throughput). Set the context the traffic needs, e.g. "
        'decode.extra_args [--context-length, "131072"], and A/B it '
        "(`dsv4ops ab A B --suite sweep`)",
    )
