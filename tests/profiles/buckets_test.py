from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsv4ops.profiles.buckets import (
    BucketSpecError,
    resolve_buckets,
    sglang_default_buckets,
    sglang_default_max_bs,
)

FIXTURE = Path(__file__).parent / "fixtures" / "sglang_cuda_graph_hook_0_5_23.py.txt"


def _sglang_generator() -> Any:
    """SGLang's own generate_decode_cuda_graph_batch_sizes, extracted from the vendored source."""
    tree = ast.parse(FIXTURE.read_text())
    func = next(
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name == "generate_decode_cuda_graph_batch_sizes"
    )
    namespace: dict[str, Any] = {"Any": Any, "resolving_view": lambda args: args}
    exec(compile(ast.Module(body=[func], type_ignores=[]), str(FIXTURE), "exec"), namespace)  # noqa: S102
    return namespace["generate_decode_cuda_graph_batch_sizes"]


NORMAL = SimpleNamespace(disable_cuda_graph_padding=False, speculative_algorithm=None)


@pytest.mark.parametrize(
    "max_bs", [1, 5, 8, 12, 13, 40, 96, 100, 160, 255, 256, 257, 300, 496, 500, 512, 513, 600, 1024]
)
def test_sglang_default_matches_sglang_generator_exactly(max_bs: int) -> None:
    assert sglang_default_buckets(max_bs) == _sglang_generator()(NORMAL, max_bs)


def test_the_generator_really_is_sglangs() -> None:
    # Guard against a broken extraction making the comparison vacuous: known points from §1.4.
    gen = _sglang_generator()
    assert (
        len(gen(NORMAL, 512)) == 52 and len(gen(NORMAL, 256)) == 36 and len(gen(NORMAL, 160)) == 24
    )
    assert gen(SimpleNamespace(disable_cuda_graph_padding=True, speculative_algorithm=None), 5) == [
        1,
        2,
        3,
        4,
        5,
    ]


def test_default_max_bs_follows_sglang_memory_table_and_clamp() -> None:
    assert sglang_default_max_bs(4, None) == 512  # 96 GB GPU, TP4
    assert sglang_default_max_bs(2, None) == 256
    assert sglang_default_max_bs(4, 96) == 96  # clamped to max running requests
    assert sglang_default_max_bs(4, 1000) == 512  # never raised by it
    assert sglang_default_max_bs(4, None, gpu_memory_gib=180) == 512
    assert sglang_default_max_bs(1, None, gpu_memory_gib=16) == 8


def test_sglang_default_spec_uses_max_running_requests() -> None:
    assert resolve_buckets(
        "sglang-default", tp_size=4, max_running_requests=96
    ) == sglang_default_buckets(96)
    assert resolve_buckets("sglang-default", tp_size=4, max_running_requests=None)[-1] == 512
    assert resolve_buckets("sglang-default:200", tp_size=4, max_running_requests=96)[-1] == 200


def test_step8_up_to_96_is_the_seed_baseline() -> None:
    got = resolve_buckets("step8", tp_size=4, max_running_requests=96)
    assert got == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96]


def test_step4_range_changes_only_the_range() -> None:
    got = resolve_buckets("step4:40-96", tp_size=4, max_running_requests=128)
    assert got[:9] == [1, 2, 4, 8, 12, 16, 24, 32, 40]
    assert got[9:23] == list(range(44, 97, 4))
    assert got[23:] == [104, 112, 120, 128]  # SGLang's spacing again above the range


def test_step_range_end_is_always_captured() -> None:
    got = resolve_buckets("step5:40-62", tp_size=4, max_running_requests=64)
    assert [b for b in got if 40 <= b <= 62] == [40, 45, 50, 55, 60, 62]
    assert got[-1] == 64


def test_explicit_list_is_kept_as_given() -> None:
    assert resolve_buckets([8, 16, 96], tp_size=4, max_running_requests=96) == [8, 16, 96]


@pytest.mark.parametrize(
    "spec", ["step0", "step", "fast", "step4:96-40", "step4:0-8", "sglang-default:0", "step4:40"]
)
def test_bad_specs_are_rejected_with_the_valid_forms(spec: str) -> None:
    with pytest.raises(BucketSpecError) as info:
        resolve_buckets(spec, tp_size=4, max_running_requests=96)
    assert spec in str(info.value)
