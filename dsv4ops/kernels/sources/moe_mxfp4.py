"""Low-batch MoE expert grouped GEMM with MXFP4 expert weights (W4A16), for DSV4-Flash decode.

MXFP4 (OCP Microscaling, e2m1 elements, 32-element blocks, ue8m0 scales) is the format the
official DeepSeek-V4-Flash Instruct checkpoints ship their routed experts in (reference §1.1:
`"mode": "mxfp4", "group_size": 32`). Same structure and routing as `moe_nvfp4.py` and the bf16
`moe_grouped_gemm.fused_moe_kernel` (`moe_tile` prologue, `moe_store` epilogue, `plan_launch`),
with the weights as:

    w_packed  uint8  [E, N, K // 2]   two e2m1 values per byte, low nibble = even k (as NVFP4 here)
    w_scale   uint8  [E, N, K // 32]  one ue8m0 scale byte per 32 values along K
    w[e, n, k] = e2m1(nibble) * 2^(w_scale[e, n, k // 32] - 127)      (byte 255 = NaN, OCP MX)

No global scale. The kernel decodes the nibbles arithmetically and the scale byte as the fp32
bit pattern of exp2(byte - 127) (`fp4_common`), multiplies (e2m1 x a power of two is exact in
bf16), runs the bf16 MMA with fp32 accumulation. Activations are bf16. Decode reads 4.25 bits per
weight (0.5 B + 1/32 B of scale) instead of bf16's 16.

As in moe_nvfp4.py the up projection (w13, gate and up rows) and the down projection (w2, per
slot, x routed weight) are two launches of the same kernel; the clamped SwiGLU between them is
`reference.swiglu`. Whether this layout (nibble order, row-major scales, no swizzle) matches the
official checkpoint's tensors byte for byte is UNVERIFIED: a loader may need to repack.

`fused_moe_mxfp4_dot_scaled_kernel` is the W4A4 variant on sm_120's native FP4 MMA
(`tl.dot_scaled` e2m1 x e2m1 with ue8m0 scales, `kind::mxf4nvf4.block_scale.scale_vec::2X ...
ue8m0`), activations quantized to MXFP4 too. It is checked only by the sm_120 AOT compile:
Triton 3.7.1's interpreter cannot run `tl.dot_scaled` (reference §3.5 gotcha 6).

Launch parameters: `kernel=fused_moe,E=256,N=512,device_name=<dev>,dtype=mxfp4_w4a16[_down].json`
(and `dtype=mxfp4_w4a4`) in moe_fp4_configs/ (docs/kernels.md). Only triton is imported at top
level (the sm_120 AOT check has no torch); torch is lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from .fp4_common import fp4_aot_signature, fp4_w4a4_tile, fp4_w4a16_tile, launch_w4a16
from .moe_grouped_gemm import AotSignature, moe_store

if TYPE_CHECKING:
    from torch import Tensor


GROUP = 32  # MXFP4: one ue8m0 scale byte per 32 e2m1 values


@triton.jit
def fused_moe_mxfp4_kernel(
    a_ptr,
    b_ptr,
    b_scale_ptr,
    c_ptr,
    topk_weights_ptr,
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
    stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # C[slot, :] = A[slot // TOP_K, :] @ dequant(B[expert(slot)]).T  (x routed weight for down)
    acc, slots, slot_ok, expert, offs_n, n_ok = fp4_w4a16_tile(
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
        TOP_K,
        BLOCK_SIZE_M,
        BLOCK_SIZE_N,
        BLOCK_SIZE_K,
        GROUP_SIZE_M,
        32,
        True,
    )
    moe_store(
        c_ptr, acc, slots, slot_ok, offs_n, n_ok, topk_weights_ptr, stride_cm, MUL_ROUTED_WEIGHT
    )


@triton.jit
def fused_moe_mxfp4_dot_scaled_kernel(
    a_ptr,
    a_scale_ptr,
    b_ptr,
    b_scale_ptr,
    c_ptr,
    topk_weights_ptr,
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
    stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # W4A4 MXFP4 on the FP4 tensor cores (sm_120: mma ... kind::mxf4nvf4.block_scale.scale_vec::2X
    # ... ue8m0, reference §3.4): A is MXFP4 too (packed [M, K/2], ue8m0 bytes [M, K/32]). NOT
    # validated on CPU (the 3.7.1 interpreter cannot run dot_scaled): AOT-compiled for sm_120
    # only; needs a GPU correctness run against fused_moe_mxfp4_kernel before it is used.
    acc, slots, slot_ok, expert, offs_n, n_ok = fp4_w4a4_tile(
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
        TOP_K,
        BLOCK_SIZE_M,
        BLOCK_SIZE_N,
        BLOCK_SIZE_K,
        GROUP_SIZE_M,
        32,
    )
    moe_store(
        c_ptr, acc, slots, slot_ok, offs_n, n_ok, topk_weights_ptr, stride_cm, MUL_ROUTED_WEIGHT
    )


def aot_signature(config: dict[str, int], down: bool = False) -> AotSignature:
    """(signature, constexprs) for compiling fused_moe_mxfp4_kernel ahead of time."""
    return fp4_aot_signature("*u8", False, config, down)


def aot_signature_dot_scaled(config: dict[str, int], down: bool = False) -> AotSignature:
    """(signature, constexprs) for compiling fused_moe_mxfp4_dot_scaled_kernel ahead of time."""
    return fp4_aot_signature("*u8", False, config, down, w4a4=True)


def grouped_gemm_mxfp4(
    a: Tensor,
    w_packed: Tensor,
    w_scale: Tensor,
    topk_ids: Tensor,
    config: dict[str, int],
    topk_weights: Tensor | None = None,
    a_per_slot: bool = False,
) -> Tensor:
    """out[slot] = a[row(slot)] @ dequant(w[topk_ids.flat[slot]]).T  -> [M * top_k, N], a's dtype.

    a [M, K] bf16 (or [M * top_k, K] with a_per_slot); w_packed uint8 [E, N, K/2]; w_scale
    uint8 ue8m0 [E, N, K/32]; optional topk_weights [M, top_k].
    """
    import torch

    if w_scale.dtype != torch.uint8:
        raise ValueError(f"MXFP4 scales are ue8m0 bytes (uint8), not {w_scale.dtype}")
    return launch_w4a16(
        fused_moe_mxfp4_kernel,
        "MXFP4",
        GROUP,
        a,
        w_packed,
        w_scale,
        (),
        topk_ids,
        config,
        topk_weights,
        a_per_slot,
    )
