"""What the FP4-expert MoE kernels share: e2m1 / ue8m0 decode and the two K loops.

Both FP4 formats store e2m1 values (1 sign, 2 exponent, 1 mantissa bit: magnitudes 0, 0.5, 1,
1.5, 2, 3, 4, 6) packed two per uint8, low nibble = even k, as `[E, N, K / 2]`, with one block
scale per GROUP values along K, `[E, N, K / GROUP]`. They differ in the scale:

    NVFP4 (moe_nvfp4.py)   GROUP 16, float8_e4m3fn scales, plus an fp32 global scale per expert
    MXFP4 (moe_mxfp4.py)   GROUP 32, ue8m0 scale bytes: 2^(byte - 127), no global scale

`fp4_dequant_dot` is the W4A16 K loop (bf16 activations, the weight tile dequantized in
registers, bf16 MMA, fp32 accumulate); `fp4_scaled_dot` is the W4A4 K loop on `tl.dot_scaled`
(both operands e2m1, sm_120's native FP4 MMA). The routing prologue and store epilogue are
`moe_grouped_gemm.moe_tile` / `moe_store`, shared with the bf16 kernel. `fp4_w4a16_tile` /
`fp4_w4a4_tile` are a whole output tile up to its epilogue (routing, the tile's pointers, the K
loop), `fp4_aot_signature` the kernels' ahead-of-time signatures and `launch_w4a16` the W4A16
launch: both formats' kernels are these plus what differs (NVFP4's global scale).

Only triton is imported at top level (the sm_120 AOT check has no torch); torch is lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from .moe_grouped_gemm import AotSignature, moe_tile, plan_launch, with_constexprs

if TYPE_CHECKING:
    from torch import Tensor


@triton.jit
def e2m1_to_f32(code):
    # code: int32 nibble 0..15 = sign(1) exponent(2) mantissa(1).
    mag = code & 7
    exp = mag >> 1
    man = (mag & 1).to(tl.float32)
    # exponent 0: subnormal 0 / 0.5; else (1 + m/2) * 2^(e-1) = (2 + m) * 2^e / 4
    val = tl.where(exp == 0, man * 0.5, (2.0 + man) * (1 << exp).to(tl.float32) * 0.25)
    return tl.where((code & 8) != 0, -val, val)


@triton.jit
def e8m0_to_f32(byte):
    # ue8m0 (OCP MX): exp2(byte - 127); byte 255 is NaN. Built as the fp32 bit pattern, so it is
    # exact with no exp2 approximation: byte << 23 for 1..254, 2^-127 is the subnormal 0x00400000.
    b = byte.to(tl.int32)
    bits = tl.where(b == 0, 0x00400000, b << 23)
    bits = tl.where(b == 255, 0x7FC00000, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def fp4_dequant(packed, scale, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
    # packed uint8 [BLOCK_N, BLOCK_K / 2] (low nibble = even k), scale fp32 [BLOCK_N, BLOCK_K / GROUP]
    # -> bf16 [BLOCK_N, BLOCK_K]. e2m1 x an e4m3 or power-of-two scale has at most 5 significant
    # bits, so the bf16 weight is exact.
    packed = packed.to(tl.int32)
    lo = e2m1_to_f32(packed & 15)  # k = 2j
    hi = e2m1_to_f32(packed >> 4)  # k = 2j + 1
    w = tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K // GROUP, GROUP))
    w = w * scale[:, :, None]
    return tl.reshape(w, (BLOCK_N, BLOCK_K)).to(tl.bfloat16)


@triton.jit
def fp4_dequant_dot(
    a_ptrs,
    b_ptrs,
    s_ptrs,
    slot_ok,
    n_ok,
    K,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP: tl.constexpr,
    UE8M0: tl.constexpr,
):
    # W4A16 K loop: acc[M, N] = A[M, K] (bf16, a_ptrs at k = 0) @ dequant(B[N, K]).T, fp32.
    # b_ptrs: packed bytes [N, K/2] at k = 0; s_ptrs: block scales [N, K/GROUP], float8_e4m3fn
    # (NVFP4) or ue8m0 bytes (UE8M0, MXFP4).
    HALF_K: tl.constexpr = BLOCK_SIZE_K // 2
    GROUPS_K: tl.constexpr = BLOCK_SIZE_K // GROUP
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    offs_kp = tl.arange(0, HALF_K)  # packed bytes
    offs_ks = tl.arange(0, GROUPS_K)  # block scales
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k0 * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=slot_ok[:, None] & (offs_k < k_left)[None, :], other=0.0)
        packed = tl.load(b_ptrs, mask=n_ok[:, None] & (offs_kp < k_left // 2)[None, :], other=0)
        scale = tl.load(
            s_ptrs, mask=n_ok[:, None] & (offs_ks < k_left // GROUP)[None, :], other=0.0
        )
        scale = e8m0_to_f32(scale) if UE8M0 else scale.to(tl.float32)
        w = fp4_dequant(packed, scale, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP)
        acc = tl.dot(a, tl.trans(w), acc)
        a_ptrs += BLOCK_SIZE_K
        b_ptrs += HALF_K
        s_ptrs += GROUPS_K
    return acc


@triton.jit
def fp4_scaled_dot(
    a_ptrs,
    as_ptrs,
    b_ptrs,
    bs_ptrs,
    slot_ok,
    n_ok,
    K,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP: tl.constexpr,
):
    # W4A4 K loop on the FP4 tensor cores: acc[M, N] = A @ B.T with both operands e2m1 and their
    # block scales (e4m3 for NVFP4 / GROUP 16, ue8m0 bytes for MXFP4 / GROUP 32: tl.dot_scaled
    # takes the format from the scale dtype). a_ptrs: packed [M, K/2], as_ptrs: scales
    # [M, K/GROUP]; b_ptrs: packed [K/2, N] (K-major, as dot_scaled takes it), bs_ptrs [N, K/GROUP].
    HALF_K: tl.constexpr = BLOCK_SIZE_K // 2
    GROUPS_K: tl.constexpr = BLOCK_SIZE_K // GROUP
    offs_kp = tl.arange(0, HALF_K)
    offs_ks = tl.arange(0, GROUPS_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k0 * BLOCK_SIZE_K
        kp_ok = offs_kp < k_left // 2
        ks_ok = offs_ks < k_left // GROUP
        a = tl.load(a_ptrs, mask=slot_ok[:, None] & kp_ok[None, :], other=0)
        a_s = tl.load(as_ptrs, mask=slot_ok[:, None] & ks_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=kp_ok[:, None] & n_ok[None, :], other=0)
        b_s = tl.load(bs_ptrs, mask=n_ok[:, None] & ks_ok[None, :], other=0.0)
        acc = tl.dot_scaled(a, a_s, "e2m1", b, b_s, "e2m1", acc)
        a_ptrs += HALF_K
        as_ptrs += GROUPS_K
        b_ptrs += HALF_K
        bs_ptrs += GROUPS_K
    return acc


@triton.jit
def fp4_w4a16_tile(
    a_ptr,
    b_ptr,
    b_scale_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    num_tokens_post_padded_ptr,
    N,
    K,
    num_valid_tokens,
    stride_am,
    stride_be,
    stride_bn,
    stride_se,
    stride_sn,
    TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    GROUP: tl.constexpr,
    UE8M0: tl.constexpr,
):
    # One W4A16 tile up to its epilogue: C[slot, :] = A[slot // TOP_K, :] @ dequant(B[expert]).T
    # (fp32). Returns it with moe_tile's routing (the caller scales it and calls moe_store).
    slots, slot_ok, a_rows, expert, offs_n, n_ok = moe_tile(
        num_tokens_post_padded_ptr,
        sorted_token_ids_ptr,
        expert_ids_ptr,
        N,
        num_valid_tokens,
        TOP_K,
        BLOCK_SIZE_M,
        BLOCK_SIZE_N,
        GROUP_SIZE_M,
    )
    rows_n = offs_n.to(tl.int64)[:, None]
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + tl.arange(0, BLOCK_SIZE_K)[None, :]
    b_ptrs = (
        b_ptr + expert * stride_be + rows_n * stride_bn + tl.arange(0, BLOCK_SIZE_K // 2)[None, :]
    )
    s_ptrs = (
        b_scale_ptr
        + expert * stride_se
        + rows_n * stride_sn
        + tl.arange(0, BLOCK_SIZE_K // GROUP)[None, :]
    )
    acc = fp4_dequant_dot(
        a_ptrs,
        b_ptrs,
        s_ptrs,
        slot_ok,
        n_ok,
        K,
        BLOCK_SIZE_M,
        BLOCK_SIZE_N,
        BLOCK_SIZE_K,
        GROUP,
        UE8M0,
    )
    return acc, slots, slot_ok, expert, offs_n, n_ok


@triton.jit
def fp4_w4a4_tile(
    a_ptr,
    a_scale_ptr,
    b_ptr,
    b_scale_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    num_tokens_post_padded_ptr,
    N,
    K,
    num_valid_tokens,
    stride_am,
    stride_asm,
    stride_be,
    stride_bn,
    stride_se,
    stride_sn,
    TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    GROUP: tl.constexpr,
):
    # One W4A4 tile up to its epilogue on the FP4 tensor cores (A packed [M, K/2] with its block
    # scales [M, K/GROUP]); returns it with moe_tile's routing, as fp4_w4a16_tile.
    slots, slot_ok, a_rows, expert, offs_n, n_ok = moe_tile(
        num_tokens_post_padded_ptr,
        sorted_token_ids_ptr,
        expert_ids_ptr,
        N,
        num_valid_tokens,
        TOP_K,
        BLOCK_SIZE_M,
        BLOCK_SIZE_N,
        GROUP_SIZE_M,
    )
    offs_kp = tl.arange(0, BLOCK_SIZE_K // 2)
    offs_ks = tl.arange(0, BLOCK_SIZE_K // GROUP)
    rows_n = offs_n.to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_kp[None, :]
    as_ptrs = a_scale_ptr + a_rows[:, None] * stride_asm + offs_ks[None, :]
    b_ptrs = b_ptr + expert * stride_be + rows_n[None, :] * stride_bn + offs_kp[:, None]
    bs_ptrs = b_scale_ptr + expert * stride_se + rows_n[:, None] * stride_sn + offs_ks[None, :]
    acc = fp4_scaled_dot(
        a_ptrs,
        as_ptrs,
        b_ptrs,
        bs_ptrs,
        slot_ok,
        n_ok,
        K,
        BLOCK_SIZE_M,
        BLOCK_SIZE_N,
        BLOCK_SIZE_K,
        GROUP,
    )
    return acc, slots, slot_ok, expert, offs_n, n_ok


def fp4_aot_signature(
    scale: str, gscale: bool, config: dict[str, int], down: bool, w4a4: bool = False
) -> AotSignature:
    """(signature, constexprs) of an FP4 MoE kernel for `triton.compile`, in its parameter order:
    `scale` is the block scales' type (`*u8` ue8m0, `*fp8e4nv` e4m3), `gscale` whether the kernel
    takes fp32 global scales (NVFP4), `w4a4` the dot_scaled variant (FP4 activations too)."""
    g = {"_gscale_ptr": "*fp32"} if gscale else {}
    a = (
        {"a_ptr": "*u8", "a_scale_ptr": scale, **{f"a{k}": v for k, v in g.items()}}
        if w4a4
        else {"a_ptr": "*bf16"}
    )
    return with_constexprs(
        {
            **a,
            "b_ptr": "*u8",
            "b_scale_ptr": scale,
            **{f"b{k}": v for k, v in g.items()},
            "c_ptr": "*bf16",
            "topk_weights_ptr": "*fp32",
            "sorted_token_ids_ptr": "*i32",
            "expert_ids_ptr": "*i32",
            "num_tokens_post_padded_ptr": "*i32",
            "N": "i32",
            "K": "i32",
            "num_valid_tokens": "i32",
            "stride_am": "i32",
            **({"stride_asm": "i32"} if w4a4 else {}),
            "stride_be": "i32",
            "stride_bn": "i32",
            "stride_se": "i32",
            "stride_sn": "i32",
            "stride_cm": "i32",
        },
        config,
        down,
    )


def launch_w4a16(
    kernel: triton.JITFunction,
    fmt: str,
    group: int,
    a: Tensor,
    w_packed: Tensor,
    w_scale: Tensor,
    gscale: tuple[Tensor, ...],
    topk_ids: Tensor,
    config: dict[str, int],
    topk_weights: Tensor | None,
    a_per_slot: bool,
) -> Tensor:
    """Run a W4A16 FP4 MoE kernel (its global-scale pointer, if any, in `gscale`); its output."""
    k = check_fp4_shapes(fmt, group, a, w_packed, w_scale)
    n_experts, n, _ = w_packed.shape
    p = plan_launch(a, topk_ids, n_experts, n, config, topk_weights, a_per_slot)
    kernel[p.grid](
        a,
        w_packed,
        w_scale,
        *gscale,
        p.out,
        p.topk_weights,
        p.sorted_ids,
        p.expert_ids,
        p.n_post,
        n,
        k,
        p.n_valid,
        a.stride(0),
        w_packed.stride(0),
        w_packed.stride(1),
        w_scale.stride(0),
        w_scale.stride(1),
        p.out.stride(0),
        **p.kwargs,
    )
    return p.out


def check_fp4_shapes(fmt: str, group: int, a: Tensor, w_packed: Tensor, w_scale: Tensor) -> int:
    """Validate an FP4 weight triple against the activations; returns K. Raises ValueError."""
    n_experts, n, half_k = w_packed.shape
    k: int = 2 * half_k
    if k % group or tuple(w_scale.shape) != (n_experts, n, k // group) or a.shape[1] != k:
        raise ValueError(
            f"{fmt} shapes: a {tuple(a.shape)}, w_packed {tuple(w_packed.shape)}, "
            f"w_scale {tuple(w_scale.shape)} (K must be a multiple of {group})"
        )
    if w_packed.stride(2) != 1 or w_scale.stride(2) != 1 or a.stride(1) != 1:
        raise ValueError("a, w_packed and w_scale must be contiguous along K")
    return k
