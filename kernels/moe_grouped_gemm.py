"""Low-batch MoE expert grouped GEMM for DSV4-Flash decode (SGLang fused-MoE structure).

Tokens are sorted by expert and each expert's rows padded to BLOCK_SIZE_M (`moe_align`), then one
program computes a BLOCK_SIZE_M x BLOCK_SIZE_N tile of one expert's output. At decode the batch
is small (~2 tokens per expert at 60-90 requests, top-6 of 256), so the cost is the weight load:
each active expert's [N, K] slab is read once per N tile. Launch parameters come from JSON files in
SGLang's fused-MoE layout (`E=256,N=512,device_name=...json`, keys = batch size M), the same
files SGLang reads through SGLANG_MOE_CONFIG_DIR, so one file drives both.

Dtypes: bf16 activations and bf16 expert weights (fp32 accumulate), the `dtype`-less SGLang
config name. NVFP4 expert weights: `moe_nvfp4.py` (same routing); MXFP4 is not implemented.

Only triton is imported at top level (the sm_120 AOT check has no torch); torch is lazy.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

# DSV4-Flash: 256 routed experts, top-6, hidden 4096, moe_intermediate 2048 (512 per rank at TP4).
N_EXPERTS = 256
TOP_K = 6
HIDDEN = 4096
INTERMEDIATE = 2048


@triton.jit
def fused_moe_kernel(
    a_ptr, b_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
    num_tokens_post_padded_ptr,
    N, K, num_valid_tokens,
    stride_am, stride_be, stride_bn, stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # C[slot, :] = A[slot // TOP_K, :] @ B[expert(slot)].T  (x routed weight for the down proj)
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(tl.load(num_tokens_post_padded_ptr), BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    group = pid // (GROUP_SIZE_M * num_pid_n)
    first_m = group * GROUP_SIZE_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % group_m)
    pid_n = (pid % (GROUP_SIZE_M * num_pid_n)) // group_m

    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    slots = tl.load(sorted_token_ids_ptr + offs_m)
    slot_ok = slots < num_valid_tokens
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_SIZE_K)

    a_rows = tl.where(slot_ok, slots // TOP_K, 0).to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + expert * stride_be + offs_n.to(tl.int64)[None, :] * stride_bn + offs_k[:, None]
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(tl.cdiv(K, BLOCK_SIZE_K)):
        k_ok = offs_k < K - k0 * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=slot_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K
        b_ptrs += BLOCK_SIZE_K
    if MUL_ROUTED_WEIGHT:
        w = tl.load(topk_weights_ptr + slots, mask=slot_ok, other=0.0)
        acc = acc * w[:, None]
    c_ptrs = c_ptr + slots.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=slot_ok[:, None] & n_ok[None, :])


def aot_signature(config: dict[str, int], down: bool = False) -> tuple:
    """(signature, constexprs) for compiling this kernel ahead of time with `config`."""
    signature = {
        "a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "topk_weights_ptr": "*fp32",
        "sorted_token_ids_ptr": "*i32", "expert_ids_ptr": "*i32",
        "num_tokens_post_padded_ptr": "*i32",
        "N": "i32", "K": "i32", "num_valid_tokens": "i32",
        "stride_am": "i32", "stride_be": "i32", "stride_bn": "i32", "stride_cm": "i32",
    }
    constexprs = {
        # The down projection reads one row per slot and applies the routed weight.
        "MUL_ROUTED_WEIGHT": down, "TOP_K": 1 if down else TOP_K,
        "BLOCK_SIZE_M": config["BLOCK_SIZE_M"], "BLOCK_SIZE_N": config["BLOCK_SIZE_N"],
        "BLOCK_SIZE_K": config["BLOCK_SIZE_K"], "GROUP_SIZE_M": config["GROUP_SIZE_M"],
    }
    for name in constexprs:
        signature[name] = "constexpr"
    return signature, constexprs


def moe_align(topk_ids: Any, block_m: int, n_experts: int) -> tuple[Any, Any, Any]:
    """Sort (token, slot) pairs by expert, pad each expert's run to block_m.

    Returns (sorted_slot_ids, expert_ids per block, num_tokens_post_padded [1]); padding slots
    hold M*top_k (out of range, masked in the kernel). Plain torch: the decode batch is small.
    """
    import torch

    flat = topk_ids.flatten().to(torch.int64).cpu()  # host-side; callers move the result to the device
    pad_id = flat.numel()
    slots, blocks = [], []
    for expert in torch.unique(flat).tolist():
        ids = torch.nonzero(flat == expert).flatten()
        n_blocks = -(-ids.numel() // block_m)
        padded = torch.full((n_blocks * block_m,), pad_id, dtype=torch.int64)
        padded[: ids.numel()] = ids
        slots.append(padded)
        blocks += [expert] * n_blocks
    sorted_ids = torch.cat(slots).to(torch.int32)
    expert_ids = torch.tensor(blocks, dtype=torch.int32)
    return sorted_ids, expert_ids, torch.tensor([sorted_ids.numel()], dtype=torch.int32)


def grouped_gemm(a: Any, w: Any, topk_ids: Any, config: dict[str, int],
                 topk_weights: Any = None, a_per_slot: bool = False) -> Any:
    """out[slot] = a[row(slot)] @ w[topk_ids.flat[slot]].T  -> [M * top_k, N].

    a [M, K] (one row per token) or, with a_per_slot, [M * top_k, K] (one row per slot, as the
    down projection sees it); w [E, N, K]; optional topk_weights [M, top_k] multiply each slot.
    """
    import torch

    n_tokens, top_k = topk_ids.shape
    n_experts, n, k = w.shape
    sorted_ids, expert_ids, n_post = moe_align(topk_ids, config["BLOCK_SIZE_M"], n_experts)
    sorted_ids, expert_ids, n_post = (t.to(a.device) for t in (sorted_ids, expert_ids, n_post))
    out = torch.zeros((n_tokens * top_k, n), dtype=a.dtype, device=a.device)
    weights = (topk_weights if topk_weights is not None else torch.ones(n_tokens, top_k, device=a.device))
    grid = (triton.cdiv(sorted_ids.numel(), config["BLOCK_SIZE_M"]) * triton.cdiv(n, config["BLOCK_SIZE_N"]),)
    fused_moe_kernel[grid](
        a, w, out, weights.to(torch.float32).contiguous(), sorted_ids, expert_ids, n_post,
        n, k, n_tokens * top_k,
        a.stride(0), w.stride(0), w.stride(1), out.stride(0),
        MUL_ROUTED_WEIGHT=topk_weights is not None, TOP_K=1 if a_per_slot else top_k,
        BLOCK_SIZE_M=config["BLOCK_SIZE_M"], BLOCK_SIZE_N=config["BLOCK_SIZE_N"],
        BLOCK_SIZE_K=config["BLOCK_SIZE_K"], GROUP_SIZE_M=config["GROUP_SIZE_M"],
        num_warps=config["num_warps"], num_stages=config["num_stages"],
    )
    return out
