"""Low-batch MoE expert grouped GEMM with NVFP4 expert weights (W4A16), for DSV4-Flash decode.

Same structure and routing as `moe_grouped_gemm.fused_moe_kernel` (tokens sorted by expert and
padded to BLOCK_SIZE_M by `moe_align`, one program per BLOCK_SIZE_M x BLOCK_SIZE_N tile of one
expert's output, the down projection multiplies the routed weight), but the expert weights are
NVFP4, the format of NVIDIA's `nvidia/DeepSeek-V4-Flash-NVFP4` conversion (reference §1.1):

    w_packed  uint8          [E, N, K // 2]   two e2m1 values per byte, low nibble = even k
    w_scale   float8_e4m3fn  [E, N, K // 16]  one ue4m3 block scale per 16 values along K
    w_gscale  float32        [E]              the per-tensor (per expert) global scale
    w[e, n, k] = e2m1(nibble) * float(w_scale[e, n, k // 16]) * w_gscale[e]

e2m1 = 1 sign, 2 exponent, 1 mantissa bit: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. The kernel
decodes the nibbles arithmetically, multiplies the block scales (e2m1 x e4m3 has at most 5
significant bits, so the bf16 product is exact), runs the bf16 MMA with fp32 accumulation, and
applies the global scale to the accumulator. Activations are bf16. The official DSV4 checkpoints
ship MXFP4 instead (32-value blocks, ue8m0 scales): `moe_mxfp4.py`. Both call the shared helpers
(`moe_grouped_gemm.moe_tile` / `moe_store`, `fp4_common`'s e2m1 decode and K loops). The
packing order and scale layout follow the reference's prototype (§3.2); that they match the
ModelOpt checkpoint byte for byte is UNVERIFIED (reference §4.4).

Decode reads 4.5 bits per weight instead of bf16's 16: at ~2 tokens per expert the kernel is
weight-load bound, so that is the point. `fused_moe_nvfp4_dot_scaled_kernel` is the native FP4
tensor-core variant (W4A4: activations quantized to NVFP4 too), checked only by the sm_120 AOT
compile, because Triton's CPU interpreter computes NVFP4 `tl.dot_scaled` wrongly (reference
§3.5, gotcha 6: it reads the ue4m3 scale bits as e8m0 exponents).

Launch parameters come from the package's own config files (`kernel=fused_moe,...,dtype=nvfp4_w4a16`,
SGLang's schema; SGLang's Triton fused-MoE has no FP4 dtype to name them after; docs/kernels.md).
Only triton is imported at top level (the sm_120 AOT check has no torch); torch is lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from .fp4_common import fp4_aot_signature, fp4_w4a4_tile, fp4_w4a16_tile, launch_w4a16
from .moe_grouped_gemm import AotSignature, moe_store

if TYPE_CHECKING:
    from torch import Tensor


GROUP = 16  # NVFP4: one ue4m3 scale per 16 e2m1 values


@triton.jit
def fused_moe_nvfp4_kernel(
    a_ptr,
    b_ptr,
    b_scale_ptr,
    b_gscale_ptr,
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
        16,
        False,
    )
    acc = acc * tl.load(b_gscale_ptr + expert)
    moe_store(
        c_ptr, acc, slots, slot_ok, offs_n, n_ok, topk_weights_ptr, stride_cm, MUL_ROUTED_WEIGHT
    )


@triton.jit
def fused_moe_nvfp4_dot_scaled_kernel(
    a_ptr,
    a_scale_ptr,
    a_gscale_ptr,
    b_ptr,
    b_scale_ptr,
    b_gscale_ptr,
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
    # W4A4 NVFP4 on the FP4 tensor cores (sm_120: mma ... kind::mxf4nvf4.block_scale.scale_vec::4X
    # ... ue4m3, reference §3.4): A is NVFP4 too (packed [M, K/2], ue4m3 scales [M, K/16], one
    # fp32 global scale). NOT validated on CPU: Triton's interpreter computes NVFP4 dot_scaled
    # wrongly (reference §3.5 gotcha 6), so this kernel is only AOT-compiled for sm_120 and
    # needs a GPU correctness run against fused_moe_nvfp4_kernel before it is used.
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
        16,
    )
    acc = acc * (tl.load(b_gscale_ptr + expert) * tl.load(a_gscale_ptr))
    moe_store(
        c_ptr, acc, slots, slot_ok, offs_n, n_ok, topk_weights_ptr, stride_cm, MUL_ROUTED_WEIGHT
    )


def aot_signature(config: dict[str, int], down: bool = False) -> AotSignature:
    """(signature, constexprs) for compiling fused_moe_nvfp4_kernel ahead of time."""
    return fp4_aot_signature("*fp8e4nv", True, config, down)


def aot_signature_dot_scaled(config: dict[str, int], down: bool = False) -> AotSignature:
    """(signature, constexprs) for compiling fused_moe_nvfp4_dot_scaled_kernel ahead of time."""
    return fp4_aot_signature("*fp8e4nv", True, config, down, w4a4=True)


def grouped_gemm_nvfp4(
    a: Tensor,
    w_packed: Tensor,
    w_scale: Tensor,
    w_gscale: Tensor,
    topk_ids: Tensor,
    config: dict[str, int],
    topk_weights: Tensor | None = None,
    a_per_slot: bool = False,
) -> Tensor:
    """out[slot] = a[row(slot)] @ dequant(w[topk_ids.flat[slot]]).T  -> [M * top_k, N], a's dtype.

    a [M, K] bf16 (or [M * top_k, K] with a_per_slot); w_packed uint8 [E, N, K/2]; w_scale
    float8_e4m3fn [E, N, K/16]; w_gscale fp32 [E]; optional topk_weights [M, top_k].
    """
    import torch

    return launch_w4a16(
        fused_moe_nvfp4_kernel,
        "NVFP4",
        GROUP,
        a,
        w_packed,
        w_scale,
        (w_gscale.to(torch.float32).contiguous(),),
        topk_ids,
        config,
        topk_weights,
        a_per_slot,
    )
