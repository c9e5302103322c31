"""NVFP4-expert MoE (kernels/moe_nvfp4.py): the torch reference's format, and the kernel under
Triton's CPU interpreter against it.

Format (NVIDIA's DeepSeek-V4-Flash-NVFP4 conversion): e2m1 values packed two per uint8 (low nibble
= even k), one float8_e4m3fn scale per 16 values along K, one fp32 global scale per expert.

Shapes here are small (E <= 8, hidden <= 256, intermediate <= 64, <= 4 tokens) because the
interpreter runs every program in numpy; the shipped configs' own cases run in interp_test. The
GPU benchmark (benchmarks/kernels_gpu.py) covers the full DSV4-Flash per-rank shape at every
decode bucket: E=256 experts, top-6, hidden 4096, intermediate 2048 / TP4 -> N=512 per rank, for
both w13 ([E, 1024, 4096]) and w2 ([E, 4096, 512]). The W4A4 tl.dot_scaled variant is only
compiled for sm_120 (aot_test): the interpreter computes NVFP4 dot_scaled wrongly (reference §3.5,
gotcha 6).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.kernels.interpreter import enable

pytestmark = pytest.mark.kernels
torch = pytest.importorskip("torch")

enable()  # before any kernel module is imported (conftest does it too)

from dsv4ops.kernels.sources.moe_nvfp4 import grouped_gemm_nvfp4  # noqa: E402
from dsv4ops.kernels.sources.reference import (  # noqa: E402
    dequantize_nvfp4,
    e2m1_decode,
    grouped_gemm_nvfp4_ref,
    moe_layer_nvfp4_ref,
    moe_layer_ref,
    pack_nibbles,
    quantize_nvfp4,
    swiglu,
    unpack_nibbles,
)

SMALL = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 32,
    "BLOCK_SIZE_K": 256,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}
LARGE = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}


def test_e2m1_codes_and_nibble_order() -> None:
    values = e2m1_decode(torch.arange(16))
    assert values.tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6]
    # 0x97: low nibble 7 (+6.0) is element 0, high nibble 9 (-0.5) is element 1
    assert e2m1_decode(unpack_nibbles(torch.tensor([0x97], dtype=torch.uint8))).tolist() == [
        6.0,
        -0.5,
    ]
    codes = torch.randint(0, 16, (3, 5, 64), dtype=torch.uint8)
    assert torch.equal(unpack_nibbles(pack_nibbles(codes)), codes)


def test_quantizer_is_exact_on_representable_weights_and_close_on_random_ones() -> None:
    g = torch.Generator().manual_seed(11)
    # e2m1 values x a power-of-two block scale x a global scale: representable, so exact
    codes = torch.randint(0, 16, (2, 4, 32), generator=g)
    codes[..., 0] = codes[..., 16] = 7  # every block holds +6.0: its scale is amax / 6 exactly
    block = torch.exp2(torch.randint(-3, 4, (2, 4, 2), generator=g).float()).repeat_interleave(
        16, dim=-1
    )
    w = e2m1_decode(codes) * block * torch.tensor([1.0, 3.0])[:, None, None]
    packed, scale, gscale = quantize_nvfp4(w)
    assert packed.dtype == torch.uint8 and packed.shape == (2, 4, 16)
    assert scale.dtype == torch.float8_e4m3fn and scale.shape == (2, 4, 2) and gscale.shape == (2,)
    assert torch.allclose(dequantize_nvfp4(packed, scale, gscale), w, rtol=1e-6, atol=0)
    # random weights: NVFP4's own error (~0.1 relative), a zero block stays zero
    r = torch.randn(3, 8, 64, generator=g)
    r[0, 0, :16] = 0
    d = dequantize_nvfp4(*quantize_nvfp4(r))
    assert (d[0, 0, :16] == 0).all()
    assert 0.02 < ((d - r).norm() / r.norm()).item() < 0.15
    with pytest.raises(ValueError):
        quantize_nvfp4(torch.randn(1, 4, 24))


def test_kernel_decodes_every_byte_and_scale_like_the_reference() -> None:
    """Every packed byte value (all 16 x 16 nibble pairs), scales from e4m3 subnormals to 448,
    a different global scale per expert; w13-like (one row per token) and w2-like (per slot,
    routed weight) launches."""
    g = torch.Generator().manual_seed(2)
    e, n, k = 3, 32, 512
    packed = torch.arange(e * n * k // 2).remainder(256).to(torch.uint8).reshape(e, n, k // 2)
    packed = packed[:, torch.randperm(n, generator=g)].contiguous()
    scale_vals = torch.tensor([2.0**-9, 0.0625, 0.5, 1.0, 1.75, 12.0, 240.0, 448.0])
    scale = scale_vals[torch.randint(0, 8, (e, n, k // 16), generator=g)].to(torch.float8_e4m3fn)
    gscale = torch.tensor([1 / 512, 1 / 2048, 1 / 64])
    ids = torch.tensor([[0, 2], [1, 0], [2, 1], [0, 1]], dtype=torch.int32)
    a = torch.randn(4, k, generator=g).to(torch.bfloat16)
    out = grouped_gemm_nvfp4(a, packed, scale, gscale, ids, SMALL)
    ref = grouped_gemm_nvfp4_ref(a, packed, scale, gscale, ids)
    assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    a_slot = torch.randn(8, k, generator=g).to(torch.bfloat16)
    weights = torch.rand(4, 2, generator=g)
    out = grouped_gemm_nvfp4(
        a_slot, packed, scale, gscale, ids, LARGE, topk_weights=weights, a_per_slot=True
    )
    ref = grouped_gemm_nvfp4_ref(a_slot, packed, scale, gscale, ids, weights, a_per_slot=True)
    assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    with pytest.raises(ValueError, match="multiple of 16"):
        grouped_gemm_nvfp4(a[:, :8], packed[:, :, :4], scale[:, :, :1], gscale, ids, SMALL)


def test_nvfp4_layer_up_swiglu_down_matches_reference_and_stays_near_bf16() -> None:
    """w13 -> clamped SwiGLU -> w2 x routed weight with NVFP4 experts, as decode runs them; the
    result matches the reference over the dequantized weights, and differs from the bf16-weight
    layer only by NVFP4's quantization error."""
    g = torch.Generator().manual_seed(4)
    m, e, hidden, inter = 2, 8, 128, 32
    x = torch.randn(m, hidden, generator=g).to(torch.bfloat16)
    w13 = torch.randn(e, 2 * inter, hidden, generator=g) / 8
    w2 = torch.randn(e, hidden, inter, generator=g) / 8
    ids = torch.stack([torch.randperm(e, generator=g)[:6] for _ in range(m)]).to(torch.int32)
    weights = torch.softmax(torch.randn(m, 6, generator=g), dim=1)
    q13, q2 = quantize_nvfp4(w13), quantize_nvfp4(w2)
    up = grouped_gemm_nvfp4(x, *q13, ids, SMALL)
    down = grouped_gemm_nvfp4(
        swiglu(up).to(torch.bfloat16), *q2, ids, SMALL, topk_weights=weights, a_per_slot=True
    )
    out = down.float().view(m, 6, hidden).sum(dim=1)
    ref = moe_layer_nvfp4_ref(x, q13, q2, ids, weights)
    assert ((out - ref).abs().max() / ref.abs().max()).item() < 2e-2
    bf16 = moe_layer_ref(x, w13.to(torch.bfloat16), w2.to(torch.bfloat16), ids, weights)
    assert 0.01 < ((out - bf16).norm() / bf16.norm()).item() < 0.3


def test_gpu_benchmark_nvfp4_plumbing_on_cpu() -> None:
    """benchmarks/kernels_gpu.py's NVFP4 inputs, byte accounting and correctness check (which
    dequantizes only the routed experts, remapping their ids) at a tiny shape on CPU."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "kernels_gpu.py"
    spec = importlib.util.spec_from_file_location("kernels_gpu_under_test", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    args, nbytes = bench.moe_nvfp4_inputs(torch, 2, "cpu", experts=16, hidden=128, inter=32)
    used = torch.unique(args[3]).numel()
    assert (
        nbytes == int(used * (2 * 32 * 128 + 128 * 32) * 0.5625) + used * 8 + 2 * 6 * (128 + 64) * 4
    )
    ok, err = bench.check_nvfp4(torch, args, SMALL, LARGE)
    assert ok, err


def test_the_dot_scaled_kernels_are_refused_by_the_interpreter_check() -> None:
    """Running them under the interpreter would 'pass' or 'fail' on wrong numerics (ue4m3 scale
    bits read as e8m0 exponents, reference §3.5 gotcha 6): the check refuses, naming why."""
    from dsv4ops.kernels.interp_check import run_case

    with pytest.raises(ValueError, match="gotcha 6"):
        run_case("fused_moe_nvfp4_w4a4_up", SMALL)
