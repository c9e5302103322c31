"""MXFP4-expert MoE (kernels/moe_mxfp4.py): the torch reference quantizer's format, the ue8m0
decode, and the kernel under Triton's CPU interpreter against the reference.

Format (OCP MX, the official DeepSeek-V4-Flash checkpoints' routed experts): e2m1 values packed
two per uint8 (low nibble = even k, as NVFP4 here), one ue8m0 scale byte per 32 values along K,
value = e2m1 * 2^(byte - 127), no global scale.

Shapes here are small (E <= 8, K <= 512, N <= 64) because the interpreter runs
every program in numpy. The batch sizes are real: `test_layer_at_the_profiles_decode_buckets`
maps every decode bucket of every shipped profile to the MXFP4 configs SGLang's nearest-M lookup
picks and runs the w13 -> SwiGLU -> w2 layer once per distinct (up, down) config pair, at the
smallest bucket that uses it; interp_test runs each distinct shipped config's own case. The GPU
benchmark (benchmarks/kernels_gpu.py, `fused_moe_mxfp4`) covers the full DSV4-Flash per-rank
shape at every decode bucket: E=256 experts, top-6, hidden 4096, intermediate 2048 / TP4 -> N=512
per rank, for both w13 ([E, 1024, 4096]) and w2 ([E, 4096, 512]). The W4A4 tl.dot_scaled variant
is only compiled for sm_120 (aot_test): Triton 3.7.1's interpreter cannot run dot_scaled.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dsv4ops.kernels.catalog import nearest, shipped_configs
from dsv4ops.kernels.interpreter import enable

pytestmark = pytest.mark.kernels
torch = pytest.importorskip("torch")

enable()  # before any kernel module is imported (conftest does it too)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from dsv4ops.kernels.sources.fp4_common import e8m0_to_f32  # noqa: E402
from dsv4ops.kernels.sources.moe_mxfp4 import grouped_gemm_mxfp4  # noqa: E402
from dsv4ops.kernels.sources.reference import (  # noqa: E402
    dequantize_mxfp4,
    e2m1_decode,
    e2m1_encode_rne,
    e8m0_decode,
    grouped_gemm_mxfp4_ref,
    moe_layer_mxfp4_ref,
    moe_layer_ref,
    quantize_mxfp4,
    swiglu,
    unpack_nibbles,
)

REPO = Path(__file__).resolve().parents[2]
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


# Triton reads this kernel's parameter annotations, so they stay unannotated (and triton.jit is
# untyped): the two ignores are for that, not for a type mistake.
@triton.jit  # type: ignore[misc]
def _e8m0_probe(src, dst, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # Triton device code
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, e8m0_to_f32(tl.load(src + offs, mask=offs < n, other=0)), mask=offs < n)


def test_e8m0_decode_in_the_kernel_and_the_reference() -> None:
    """Bytes 0, 127, 128, 254 are 2^-127 (an fp32 subnormal, not flushed), 1, 2, 2^127, exactly;
    255 is NaN (OCP MX; the reference quantizer never writes it)."""
    raw = torch.tensor([0, 127, 128, 254, 255, 1, 120], dtype=torch.uint8)
    want = [2.0**-127, 1.0, 2.0, 2.0**127]
    out = torch.empty(raw.numel(), dtype=torch.float32)
    _e8m0_probe[(1,)](raw, out, raw.numel(), BLOCK=8)
    for decoded in (out, e8m0_decode(raw)):
        assert decoded.dtype == torch.float32
        assert decoded[:4].tolist() == want
        assert math.isnan(decoded[4].item())
        assert decoded[5:].tolist() == [2.0**-126, 2.0**-7]


def test_quantizer_rounds_to_nearest_even_and_saturates() -> None:
    grid = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert e2m1_decode(e2m1_encode_rne(torch.tensor(grid))).tolist() == grid
    # ties go to the even code: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, -0.25])
    assert e2m1_decode(e2m1_encode_rne(ties)).tolist() == [0, 1, 1, 2, 2, 4, 4, -4, 0]
    assert e2m1_encode_rne(torch.tensor([-0.25, -0.0])).tolist() == [0, 0]  # no -0 code
    near = torch.tensor([0.26, 0.74, 2.51, 4.99, 5.01, 7.0, 1e9])
    assert e2m1_decode(e2m1_encode_rne(near)).tolist() == [0.5, 0.5, 3, 4, 6, 6, 6]


def test_quantizer_scale_bytes_and_nibble_order() -> None:
    """Shared exponent = floor(log2(amax)) - 2, stored + 127; low nibble = even k."""
    w = torch.zeros(6, 32)
    w[0, 0], w[0, 1] = 6.0, -0.5  # amax 6: exponent 0 -> byte 127, values as they are
    w[1, 5] = 1.0  # amax 1: floor(0) - 2 = -2 -> byte 125
    w[2, 3] = 7.0  # amax 7: byte 127, 7 saturates to 6
    w[3, 0] = 8.0  # amax 8: byte 128, stored as 4 x 2
    w[4, 7] = -(2.0**-128)  # tiny: exponent -130 clamped to -127, byte 0
    packed, scale = quantize_mxfp4(w)  # row 5: all zero -> byte 0, all codes 0
    assert packed.dtype == scale.dtype == torch.uint8
    assert packed.shape == (6, 16) and scale.shape == (6, 1)
    assert scale.flatten().tolist() == [127, 125, 127, 128, 0, 0]
    assert packed[0, 0].item() == 0x97  # k=0: +6.0 = code 7 (low), k=1: -0.5 = code 9 (high)
    assert unpack_nibbles(packed[1]).tolist()[5] == 6  # 1.0 / 2^-2 = 4.0 = code 6
    d = dequantize_mxfp4(packed, scale)
    assert d[0, :2].tolist() == [6.0, -0.5] and d[2, 3].item() == 6.0 and d[3, 0].item() == 8.0
    assert d[4, 7].item() == -(2.0**-128) and (d[5] == 0).all()
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize_mxfp4(torch.randn(4, 48))


def test_quantizer_round_trip_is_exact_on_representable_weights_and_close_on_random_ones() -> None:
    g = torch.Generator().manual_seed(13)
    # any e2m1 codes x a power-of-two block scale is representable: the round trip is exact,
    # and when a block holds +-4 or +-6 its scale byte is that power's exponent + 127
    codes = torch.randint(0, 16, (3, 4, 128), generator=g)
    codes[..., ::32] = torch.tensor([6, 7, 14, 15])[torch.randint(0, 4, (3, 4, 4), generator=g)]
    exps = torch.randint(-20, 21, (3, 4, 4), generator=g)
    w = e2m1_decode(codes) * torch.exp2(exps.float()).repeat_interleave(32, dim=-1)
    packed, scale = quantize_mxfp4(w.to(torch.bfloat16))  # exact in bf16 too
    assert torch.equal(scale, (exps + 127).to(torch.uint8))
    assert torch.equal(dequantize_mxfp4(packed, scale), w)
    small = e2m1_decode(torch.randint(0, 16, (2, 64), generator=g)) * 2.0**-5
    assert torch.equal(dequantize_mxfp4(*quantize_mxfp4(small)), small)  # any block amax
    # random weights: MXFP4's own error (~0.1 relative), a zero block stays zero
    r = torch.randn(3, 8, 64, generator=g)
    r[0, 0, :32] = 0
    d = dequantize_mxfp4(*quantize_mxfp4(r))
    assert (d[0, 0, :32] == 0).all()
    assert 0.02 < ((d - r).norm() / r.norm()).item() < 0.2


def test_kernel_decodes_every_byte_and_scale_like_the_reference() -> None:
    """Every packed byte value (all 16 x 16 nibble pairs), scale bytes 112..135 (2^-15 .. 2^8);
    w13-like (one row per token) and w2-like (per slot, routed weight) launches."""
    g = torch.Generator().manual_seed(2)
    e, n, k = 3, 32, 512
    packed = torch.arange(e * n * k // 2).remainder(256).to(torch.uint8).reshape(e, n, k // 2)
    packed = packed[:, torch.randperm(n, generator=g)].contiguous()
    scale = torch.randint(112, 136, (e, n, k // 32), generator=g, dtype=torch.uint8)
    ids = torch.tensor([[0, 2], [1, 0], [2, 1], [0, 1]], dtype=torch.int32)
    a = torch.randn(4, k, generator=g).to(torch.bfloat16)
    out = grouped_gemm_mxfp4(a, packed, scale, ids, SMALL)
    ref = grouped_gemm_mxfp4_ref(a, packed, scale, ids)
    assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    a_slot = torch.randn(8, k, generator=g).to(torch.bfloat16)
    weights = torch.rand(4, 2, generator=g)
    out = grouped_gemm_mxfp4(
        a_slot, packed, scale, ids, LARGE, topk_weights=weights, a_per_slot=True
    )
    ref = grouped_gemm_mxfp4_ref(a_slot, packed, scale, ids, weights, a_per_slot=True)
    assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2
    with pytest.raises(ValueError, match="multiple of 32"):
        grouped_gemm_mxfp4(a[:, :16], packed[:, :, :8], scale[:, :, :1], ids, SMALL)
    with pytest.raises(ValueError, match="ue8m0"):
        grouped_gemm_mxfp4(a, packed, scale.to(torch.float8_e4m3fn), ids, SMALL)


def test_layer_at_the_profiles_decode_buckets() -> None:
    """w13 -> clamped SwiGLU -> w2 x routed weight with MXFP4 experts at the real decode batch
    sizes: once per distinct (up, down) config pair the shipped profiles' buckets select, at the
    smallest bucket using it. It matches the reference over the dequantized weights and differs
    from the bf16-weight layer only by MXFP4's quantization error."""
    from dsv4ops.profiles import list_profiles, load_profile

    buckets = sorted(
        {b for p in list_profiles(REPO / "profiles") for b in load_profile(p).decode_buckets}
    )
    tables = {f.kernel: f.table for f in shipped_configs()}
    pairs: dict[str, tuple[int, dict[str, int], dict[str, int]]] = {}
    for m in buckets:
        up_at, down_at = (
            nearest(tables["fused_moe_mxfp4_up"], m),
            nearest(tables["fused_moe_mxfp4_down"], m),
        )
        pairs.setdefault(repr((up_at, down_at)), (m, up_at, down_at))
    assert len(pairs) >= 2 and min(m for m, _, _ in pairs.values()) == buckets[0]
    g = torch.Generator().manual_seed(4)
    e, hidden, inter = 8, 64, 32
    w13 = torch.randn(e, 2 * inter, hidden, generator=g) / 8
    w2 = torch.randn(e, hidden, inter, generator=g) / 8
    q13, q2 = quantize_mxfp4(w13), quantize_mxfp4(w2)
    for m, up_cfg, down_cfg in pairs.values():
        x = torch.randn(m, hidden, generator=g).to(torch.bfloat16)
        ids = torch.stack([torch.randperm(e, generator=g)[:6] for _ in range(m)]).to(torch.int32)
        weights = torch.softmax(torch.randn(m, 6, generator=g), dim=1)
        up = grouped_gemm_mxfp4(x, *q13, ids, up_cfg)
        down = grouped_gemm_mxfp4(
            swiglu(up).to(torch.bfloat16), *q2, ids, down_cfg, topk_weights=weights, a_per_slot=True
        )
        out = down.float().view(m, 6, hidden).sum(dim=1)
        ref = moe_layer_mxfp4_ref(x, q13, q2, ids, weights)
        assert ((out - ref).abs().max() / ref.abs().max()).item() < 2e-2, m
        bf16 = moe_layer_ref(x, w13.to(torch.bfloat16), w2.to(torch.bfloat16), ids, weights)
        assert 0.01 < ((out - bf16).norm() / bf16.norm()).item() < 0.3, m


def test_gpu_benchmark_mxfp4_plumbing_on_cpu() -> None:
    """benchmarks/kernels_gpu.py's MXFP4 inputs, byte accounting (0.5 B per weight + 1 scale byte
    per 32, no global scale) and correctness check at a tiny shape on CPU."""
    import importlib.util

    path = REPO / "benchmarks" / "kernels_gpu.py"
    spec = importlib.util.spec_from_file_location("kernels_gpu_mxfp4_under_test", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    args, nbytes = bench.moe_mxfp4_inputs(torch, 2, "cpu", experts=8, hidden=64, inter=32)
    used = torch.unique(args[3]).numel()
    weights = used * (2 * 32 * 64 + 64 * 32)
    assert nbytes == weights // 2 + weights // 32 + 2 * 6 * (64 + 64) * 4
    assert args[1][1].shape == (8, 64, 64 // 32) and args[1][1].dtype == torch.uint8
    ok, err = bench.check_mxfp4(torch, args, SMALL, LARGE)
    assert ok, err


def test_the_mxfp4_dot_scaled_kernels_are_refused_by_the_interpreter_check() -> None:
    from dsv4ops.kernels.interp_check import run_case

    with pytest.raises(ValueError, match="cannot run tl.dot_scaled"):
        run_case("fused_moe_mxfp4_w4a4_down", SMALL)
