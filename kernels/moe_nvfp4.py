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
ship MXFP4 instead (32-value blocks, ue8m0 scales); that format is not implemented here. The
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

from typing import Any

import triton
import triton.language as tl

from kernels.moe_grouped_gemm import TOP_K, moe_align

GROUP = 16  # NVFP4: one ue4m3 scale per 16 e2m1 values


@triton.jit
def _e2m1_to_f32(code):
    # code: int32 nibble 0..15 = sign(1) exponent(2) mantissa(1).
    mag = code & 7
    exp = mag >> 1
    man = (mag & 1).to(tl.float32)
    # exponent 0: subnormal 0 / 0.5; else (1 + m/2) * 2^(e-1) = (2 + m) * 2^e / 4
    val = tl.where(exp == 0, man * 0.5, (2.0 + man) * (1 << exp).to(tl.float32) * 0.25)
    return tl.where((code & 8) != 0, -val, val)


@triton.jit
def fused_moe_nvfp4_kernel(
    a_ptr, b_ptr, b_scale_ptr, b_gscale_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
    expert_ids_ptr, num_tokens_post_padded_ptr,
    N, K, num_valid_tokens,
    stride_am, stride_be, stride_bn, stride_se, stride_sn, stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # C[slot, :] = A[slot // TOP_K, :] @ dequant(B[expert(slot)]).T  (x routed weight for down)
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(tl.load(num_tokens_post_padded_ptr), BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    group = pid // (GROUP_SIZE_M * num_pid_n)
    first_m = group * GROUP_SIZE_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % group_m)
    pid_n = (pid % (GROUP_SIZE_M * num_pid_n)) // group_m

    HALF_K: tl.constexpr = BLOCK_SIZE_K // 2
    GROUPS_K: tl.constexpr = BLOCK_SIZE_K // 16
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    slots = tl.load(sorted_token_ids_ptr + offs_m)
    slot_ok = slots < num_valid_tokens
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    offs_kp = tl.arange(0, HALF_K)     # packed bytes
    offs_ks = tl.arange(0, GROUPS_K)   # block scales

    a_rows = tl.where(slot_ok, slots // TOP_K, 0).to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :]
    rows_n = offs_n.to(tl.int64)[:, None]
    b_ptrs = b_ptr + expert * stride_be + rows_n * stride_bn + offs_kp[None, :]
    s_ptrs = b_scale_ptr + expert * stride_se + rows_n * stride_sn + offs_ks[None, :]
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k0 * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=slot_ok[:, None] & (offs_k < k_left)[None, :], other=0.0)
        packed = tl.load(b_ptrs, mask=n_ok[:, None] & (offs_kp < k_left // 2)[None, :], other=0)
        scale = tl.load(s_ptrs, mask=n_ok[:, None] & (offs_ks < k_left // 16)[None, :], other=0.0)
        packed = packed.to(tl.int32)
        lo = _e2m1_to_f32(packed & 15)    # k = 2j
        hi = _e2m1_to_f32(packed >> 4)    # k = 2j + 1
        w = tl.reshape(tl.join(lo, hi), (BLOCK_SIZE_N, GROUPS_K, 16))
        w = w * scale.to(tl.float32)[:, :, None]
        w = tl.reshape(w, (BLOCK_SIZE_N, BLOCK_SIZE_K)).to(tl.bfloat16)
        acc = tl.dot(a, tl.trans(w), acc)
        a_ptrs += BLOCK_SIZE_K
        b_ptrs += HALF_K
        s_ptrs += GROUPS_K
    acc = acc * tl.load(b_gscale_ptr + expert)
    if MUL_ROUTED_WEIGHT:
        rw = tl.load(topk_weights_ptr + slots, mask=slot_ok, other=0.0)
        acc = acc * rw[:, None]
    c_ptrs = c_ptr + slots.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=slot_ok[:, None] & n_ok[None, :])


@triton.jit
def fused_moe_nvfp4_dot_scaled_kernel(
    a_ptr, a_scale_ptr, a_gscale_ptr, b_ptr, b_scale_ptr, b_gscale_ptr, c_ptr, topk_weights_ptr,
    sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr,
    N, K, num_valid_tokens,
    stride_am, stride_asm, stride_be, stride_bn, stride_se, stride_sn, stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # W4A4 NVFP4 on the FP4 tensor cores (sm_120: mma ... kind::mxf4nvf4.block_scale.scale_vec::4X
    # ... ue4m3, reference §3.4): A is NVFP4 too (packed [M, K/2], ue4m3 scales [M, K/16], one
    # fp32 global scale). NOT validated on CPU: Triton's interpreter computes NVFP4 dot_scaled
    # wrongly (reference §3.5 gotcha 6), so this kernel is only AOT-compiled for sm_120 and
    # needs a GPU correctness run against fused_moe_nvfp4_kernel before it is used.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(tl.load(num_tokens_post_padded_ptr), BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    group = pid // (GROUP_SIZE_M * num_pid_n)
    first_m = group * GROUP_SIZE_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % group_m)
    pid_n = (pid % (GROUP_SIZE_M * num_pid_n)) // group_m

    HALF_K: tl.constexpr = BLOCK_SIZE_K // 2
    GROUPS_K: tl.constexpr = BLOCK_SIZE_K // 16
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    slots = tl.load(sorted_token_ids_ptr + offs_m)
    slot_ok = slots < num_valid_tokens
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    n_ok = offs_n < N
    offs_kp = tl.arange(0, HALF_K)
    offs_ks = tl.arange(0, GROUPS_K)

    a_rows = tl.where(slot_ok, slots // TOP_K, 0).to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_kp[None, :]
    as_ptrs = a_scale_ptr + a_rows[:, None] * stride_asm + offs_ks[None, :]
    rows_n = offs_n.to(tl.int64)
    b_ptrs = b_ptr + expert * stride_be + rows_n[None, :] * stride_bn + offs_kp[:, None]
    bs_ptrs = b_scale_ptr + expert * stride_se + rows_n[:, None] * stride_sn + offs_ks[None, :]
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k0 * BLOCK_SIZE_K
        kp_ok = offs_kp < k_left // 2
        ks_ok = offs_ks < k_left // 16
        a = tl.load(a_ptrs, mask=slot_ok[:, None] & kp_ok[None, :], other=0)
        a_s = tl.load(as_ptrs, mask=slot_ok[:, None] & ks_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=kp_ok[:, None] & n_ok[None, :], other=0)
        b_s = tl.load(bs_ptrs, mask=n_ok[:, None] & ks_ok[None, :], other=0.0)
        acc = tl.dot_scaled(a, a_s, "e2m1", b, b_s, "e2m1", acc)
        a_ptrs += HALF_K
        as_ptrs += GROUPS_K
        b_ptrs += HALF_K
        bs_ptrs += GROUPS_K
    acc = acc * (tl.load(b_gscale_ptr + expert) * tl.load(a_gscale_ptr))
    if MUL_ROUTED_WEIGHT:
        rw = tl.load(topk_weights_ptr + slots, mask=slot_ok, other=0.0)
        acc = acc * rw[:, None]
    c_ptrs = c_ptr + slots.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=slot_ok[:, None] & n_ok[None, :])


def _constexprs(config: dict[str, int], down: bool) -> dict[str, Any]:
    return {
        # The down projection reads one row per slot and applies the routed weight.
        "MUL_ROUTED_WEIGHT": down, "TOP_K": 1 if down else TOP_K,
        "BLOCK_SIZE_M": config["BLOCK_SIZE_M"], "BLOCK_SIZE_N": config["BLOCK_SIZE_N"],
        "BLOCK_SIZE_K": config["BLOCK_SIZE_K"], "GROUP_SIZE_M": config["GROUP_SIZE_M"],
    }


def aot_signature(config: dict[str, int], down: bool = False) -> tuple:
    """(signature, constexprs) for compiling fused_moe_nvfp4_kernel ahead of time."""
    signature = {
        "a_ptr": "*bf16", "b_ptr": "*u8", "b_scale_ptr": "*fp8e4nv", "b_gscale_ptr": "*fp32",
        "c_ptr": "*bf16", "topk_weights_ptr": "*fp32", "sorted_token_ids_ptr": "*i32",
        "expert_ids_ptr": "*i32", "num_tokens_post_padded_ptr": "*i32",
        "N": "i32", "K": "i32", "num_valid_tokens": "i32",
        "stride_am": "i32", "stride_be": "i32", "stride_bn": "i32", "stride_se": "i32",
        "stride_sn": "i32", "stride_cm": "i32",
    }
    constexprs = _constexprs(config, down)
    for name in constexprs:
        signature[name] = "constexpr"
    return signature, constexprs


def aot_signature_dot_scaled(config: dict[str, int], down: bool = False) -> tuple:
    """(signature, constexprs) for compiling fused_moe_nvfp4_dot_scaled_kernel ahead of time."""
    signature = {
        "a_ptr": "*u8", "a_scale_ptr": "*fp8e4nv", "a_gscale_ptr": "*fp32",
        "b_ptr": "*u8", "b_scale_ptr": "*fp8e4nv", "b_gscale_ptr": "*fp32",
        "c_ptr": "*bf16", "topk_weights_ptr": "*fp32", "sorted_token_ids_ptr": "*i32",
        "expert_ids_ptr": "*i32", "num_tokens_post_padded_ptr": "*i32",
        "N": "i32", "K": "i32", "num_valid_tokens": "i32",
        "stride_am": "i32", "stride_asm": "i32", "stride_be": "i32", "stride_bn": "i32",
        "stride_se": "i32", "stride_sn": "i32", "stride_cm": "i32",
    }
    constexprs = _constexprs(config, down)
    for name in constexprs:
        signature[name] = "constexpr"
    return signature, constexprs


def grouped_gemm_nvfp4(a: Any, w_packed: Any, w_scale: Any, w_gscale: Any, topk_ids: Any,
                       config: dict[str, int], topk_weights: Any = None,
                       a_per_slot: bool = False) -> Any:
    """out[slot] = a[row(slot)] @ dequant(w[topk_ids.flat[slot]]).T  -> [M * top_k, N], a's dtype.

    a [M, K] bf16 (or [M * top_k, K] with a_per_slot); w_packed uint8 [E, N, K/2]; w_scale
    float8_e4m3fn [E, N, K/16]; w_gscale fp32 [E]; optional topk_weights [M, top_k].
    """
    import torch

    n_tokens, top_k = topk_ids.shape
    n_experts, n, half_k = w_packed.shape
    k = 2 * half_k
    if k % GROUP or w_scale.shape != (n_experts, n, k // GROUP) or a.shape[1] != k:
        raise ValueError(f"NVFP4 shapes: a {tuple(a.shape)}, w_packed {tuple(w_packed.shape)}, "
                         f"w_scale {tuple(w_scale.shape)} (K must be a multiple of {GROUP})")
    if w_packed.stride(2) != 1 or w_scale.stride(2) != 1 or a.stride(1) != 1:
        raise ValueError("a, w_packed and w_scale must be contiguous along K")
    sorted_ids, expert_ids, n_post = moe_align(topk_ids, config["BLOCK_SIZE_M"], n_experts)
    sorted_ids, expert_ids, n_post = (t.to(a.device) for t in (sorted_ids, expert_ids, n_post))
    out = torch.zeros((n_tokens * top_k, n), dtype=a.dtype, device=a.device)
    weights = topk_weights if topk_weights is not None else torch.ones(n_tokens, top_k, device=a.device)
    grid = (triton.cdiv(sorted_ids.numel(), config["BLOCK_SIZE_M"]) * triton.cdiv(n, config["BLOCK_SIZE_N"]),)
    fused_moe_nvfp4_kernel[grid](
        a, w_packed, w_scale, w_gscale.to(torch.float32).contiguous(), out,
        weights.to(torch.float32).contiguous(), sorted_ids, expert_ids, n_post,
        n, k, n_tokens * top_k,
        a.stride(0), w_packed.stride(0), w_packed.stride(1), w_scale.stride(0), w_scale.stride(1),
        out.stride(0),
        MUL_ROUTED_WEIGHT=topk_weights is not None, TOP_K=1 if a_per_slot else top_k,
        BLOCK_SIZE_M=config["BLOCK_SIZE_M"], BLOCK_SIZE_N=config["BLOCK_SIZE_N"],
        BLOCK_SIZE_K=config["BLOCK_SIZE_K"], GROUP_SIZE_M=config["GROUP_SIZE_M"],
        num_warps=config["num_warps"], num_stages=config["num_stages"],
    )
    return out
