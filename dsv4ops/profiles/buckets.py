"""Decode CUDA-graph bucket specs → the exact `--cuda-graph-bs-decode` list.

Specs (all resolve to a strictly increasing list of positive ints):

    sglang-default          SGLang 0.5.23's own list for the decode's max batch size
    sglang-default:MAX      same, for an explicit max batch size
    stepN                   SGLang's small sizes (1 2 4 8 12), then every N from 16 up to the max
    stepN:LO-HI             SGLang's default spacing, but every N between LO and HI
    [8, 16, 24, ...]        an explicit list (given in YAML as a list)

The max batch size is the decode's `max_running_requests` when set (SGLang clamps its own default
to it, reference §1.4 step 1), else SGLang's memory-table default for the box's GPUs.
"""

from __future__ import annotations

import re

# RTX PRO 6000 Blackwell, 96 GB: SGLang's memory table row "< 160 GiB" (reference §1.4).
BOX_GPU_MEMORY_GIB = 96
# Bounds on what a spec may ask for, checked before any list is built (a `step1:1-1000000000`
# would otherwise build a billion-item list). SGLang's own lists stop at 512 with 52 sizes; each
# size is a captured CUDA graph (memory and start-up time), so 512 sizes is already absurd.
MAX_BATCH_SIZE = 8192
MAX_BUCKETS = 512


class BucketSpecError(ValueError):
    """The spec string is malformed; the message says what a valid spec looks like."""


SPEC_HELP = "a list of ints, 'sglang-default', 'sglang-default:MAX', 'stepN' or 'stepN:LO-HI'"

_STEP_RE = re.compile(r"^step(\d{1,12})(?::(\d{1,12})-(\d{1,12}))?$")
_DEFAULT_RE = re.compile(r"^sglang-default(?::(\d{1,12}))?$")
# The spec grammar as regexes (the profile's JSON Schema offers the same to editors).
SPEC_PATTERNS = (_DEFAULT_RE.pattern, _STEP_RE.pattern)


def sglang_default_buckets(max_bs: int) -> list[int]:
    """SGLang 0.5.23 `generate_decode_cuda_graph_batch_sizes`, normal (non-speculative) case.

    Mirrors sglang/srt/arg_groups/cuda_graph_hook.py:500-532; tests compare against a vendored
    copy of the original function.
    """
    capture_bs = (
        [1, 2, 4, 8, 12]
        + list(range(16, 257, 8))
        + list(range(272, 512, 16))
        + list(range(512, max_bs + 1, 32))
    )
    capture_bs = [bs for bs in capture_bs if bs <= max_bs]
    if max_bs not in capture_bs:
        capture_bs.append(max_bs)
    return capture_bs


def sglang_default_max_bs(
    tp_size: int, max_running_requests: int | None, gpu_memory_gib: int = BOX_GPU_MEMORY_GIB
) -> int:
    """SGLang 0.5.23's decode max_bs when no bucket list is given (memory_hook.py:47-188)."""
    if gpu_memory_gib < 20:
        max_bs = 8
    elif gpu_memory_gib < 35:
        max_bs = 48 if tp_size < 4 else 160
    elif gpu_memory_gib < 60:
        max_bs = 32 if tp_size < 4 else 160
    elif gpu_memory_gib < 160:
        max_bs = 256 if tp_size < 4 else 512
    else:
        max_bs = 512
    # A defaulted max_bs is clamped to a lower --max-running-requests (memory_hook.py:182-188).
    if max_running_requests is not None and max_running_requests < max_bs:
        max_bs = max_running_requests
    return max_bs


def _stepped(base: list[int], step: int, lo: int, hi: int) -> list[int]:
    # Keep SGLang's spacing outside [lo, hi]; inside, every `step` from lo, and hi itself.
    inner = list(range(lo, hi + 1, step))
    if inner[-1] != hi:
        inner.append(hi)
    return sorted({bs for bs in base if bs < lo or bs > hi} | set(inner))


def resolve_buckets(
    spec: str | list[int], *, tp_size: int, max_running_requests: int | None
) -> list[int]:
    """Resolve a bucket spec (or explicit list) to the list that gets rendered.

    Raises BucketSpecError for a malformed spec. Explicit lists are returned as given (their
    ordering is checked by the semantic rules, which name the offending position).
    """
    if isinstance(spec, list):
        return list(spec)
    text = spec.strip()
    if len(text) > 64:
        raise BucketSpecError(f"unknown bucket spec {text[:40]!r}...; expected {SPEC_HELP}")
    default_max = sglang_default_max_bs(tp_size, max_running_requests)
    match = _DEFAULT_RE.match(text)
    if match:
        max_bs = int(match.group(1)) if match.group(1) else default_max
        if not 1 <= max_bs <= MAX_BATCH_SIZE:
            raise BucketSpecError(f"max batch size in {text!r} must be from 1 to {MAX_BATCH_SIZE}")
        return sglang_default_buckets(max_bs)
    match = _STEP_RE.match(text)
    if match:
        step = int(match.group(1))
        if not 1 <= step <= MAX_BATCH_SIZE:
            raise BucketSpecError(f"step in {text!r} must be from 1 to {MAX_BATCH_SIZE}")
        max_bs = default_max
        if match.group(2) is None:
            lo, hi = 16, max_bs
            if hi < lo:
                return sglang_default_buckets(max_bs)
        else:
            lo, hi = int(match.group(2)), int(match.group(3))
            if not 1 <= lo < hi <= MAX_BATCH_SIZE:
                raise BucketSpecError(
                    f"range in {text!r} must be LO-HI with 1 <= LO < HI <= {MAX_BATCH_SIZE}"
                )
            if (hi - lo) // step > MAX_BUCKETS:
                raise BucketSpecError(
                    f"{text!r} asks for {(hi - lo) // step + 1} sizes; at most {MAX_BUCKETS}"
                )
            max_bs = max(max_bs, hi)
        return _stepped(sglang_default_buckets(max_bs), step, lo, hi)
    raise BucketSpecError(f"unknown bucket spec {text!r}; expected {SPEC_HELP}")
