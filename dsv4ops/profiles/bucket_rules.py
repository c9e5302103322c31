"""The decode CUDA-graph bucket rule: sizes positive, increasing, bounded, and matching the
decode's max running requests (one of rules.RULES)."""

from __future__ import annotations

from dsv4ops.profiles.buckets import MAX_BATCH_SIZE, MAX_BUCKETS
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.model import Profile, ProfileWarning
from dsv4ops.profiles.problems import Problems
from dsv4ops.profiles.provenance import Provenance

# SGLang's DSV4 default when --max-running-requests is unset (deepseek_v4_hook.py:138-146).
DSV4_DEFAULT_MAX_RUNNING = 256


def rule_buckets(p: Profile, prov: Provenance, sink: Problems) -> list[ProfileWarning]:
    key = "flags.decode_buckets"
    if not sink.usable(key):
        return []
    buckets = p.flags.decode_buckets
    if not buckets:
        sink.report(prov.error(key, "the bucket list is empty; expected at least one batch size"))
        return []
    if len(buckets) > MAX_BUCKETS:
        sink.report(
            prov.error(
                key, f"{len(buckets)} decode buckets; at most {MAX_BUCKETS} (each is a CUDA graph)"
            )
        )
        return []
    ok = True
    for i, bs in enumerate(buckets):
        if bs < 1:
            sink.report(prov.error(f"{key}[{i}]", f"batch size {bs} must be positive"))
            ok = False
        elif bs > MAX_BATCH_SIZE:
            sink.report(
                prov.error(f"{key}[{i}]", f"batch size {excerpt(bs)} is above {MAX_BATCH_SIZE}")
            )
            ok = False
        elif i and bs <= buckets[i - 1]:
            sink.report(
                prov.error(
                    f"{key}[{i}]",
                    f"buckets must be strictly increasing; {bs} follows {buckets[i - 1]}",
                )
            )
            ok = False
    if not ok or not sink.usable("decode.max_running_requests"):
        return []
    running = p.decode.max_running_requests or DSV4_DEFAULT_MAX_RUNNING
    if _explicit_max(p.flags.decode_buckets_spec) and buckets[-1] > running:
        # SGLang drops captured sizes above its request pool (reference §1.4 step 3): the graphs
        # cost memory and start-up time and are never used; the profile asked for something else.
        where = (
            f"{key}[{len(buckets) - 1}]"
            if not isinstance(p.flags.decode_buckets_spec, str)
            else key
        )
        source = (
            "decode.max_running_requests" if p.decode.max_running_requests else "DSV4's default"
        )
        sink.report(
            prov.error(
                where,
                f"largest decode bucket {buckets[-1]} is above max running requests {running} "
                f"({source}): SGLang never runs a batch that large, and drops the CUDA graph",
                hint="lower the buckets, or raise decode.max_running_requests",
            )
        )
        return []
    if buckets[-1] < running:
        return [
            prov.warning(
                "buckets-below-max-running",
                key,
                f"largest decode bucket {buckets[-1]} < max running requests {running}: batches above "
                f"{buckets[-1]} run without a CUDA graph (eager, much slower steps)",
            )
        ]
    return []


def _explicit_max(spec: str | tuple[int, ...]) -> bool:
    """True when the spec names its largest size (a list, `sglang-default:MAX`, `stepN:LO-HI`);
    the bare specs follow SGLang's own max, which it clamps itself."""
    return not isinstance(spec, str) or ":" in spec
