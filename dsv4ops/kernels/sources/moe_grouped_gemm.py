"""Low-batch MoE expert grouped GEMM for DSV4-Flash decode (SGLang fused-MoE structure).

Tokens are sorted by expert and each expert's rows padded to BLOCK_SIZE_M (`moe_align`), then one
program computes a BLOCK_SIZE_M x BLOCK_SIZE_N tile of one expert's output. At decode the batch
is small (~2 tokens per expert at 60-90 requests, top-6 of 256), so the cost is the weight load:
each active expert's [N, K] slab is read once per N tile. Launch parameters come from JSON files in
SGLang's fused-MoE layout (`E=256,N=512,device_name=...json`, keys = batch size M), the same
files SGLang reads through SGLANG_MOE_CONFIG_DIR, so one file drives both.

Dtypes: bf16 activations and bf16 expert weights (fp32 accumulate), the `dtype`-less SGLang
config name. FP4 expert weights: `moe_nvfp4.py` (NVFP4) and `moe_mxfp4.py` (MXFP4), same
routing: their kernels call this module's `moe_tile` prologue and `moe_store` epilogue, and their
wrappers `plan_launch`.

Only triton is imported at top level (the sm_120 AOT check has no torch); torch is lazy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    from torch import Tensor


# DSV4-Flash: 256 routed experts, top-6, hidden 4096, moe_intermediate 2048 (512 per rank at TP4).
N_EXPERTS = 256
TOP_K = 6
HIDDEN = 4096
INTERMEDIATE = 2048


@triton.jit
def moe_tile(
    num_tokens_post_padded_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    N,
    num_valid_tokens,
    TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # The routing / tile prologue every MoE kernel here shares (bf16, NVFP4, MXFP4): this
    # program's BLOCK_SIZE_M x BLOCK_SIZE_N tile of one expert's output, SGLang's grouped order.
    # Returns (slots, slot_ok, a_rows, expert, offs_n, n_ok): the (token, slot) ids of the tile's
    # rows (padding >= num_valid_tokens), the activation row each reads (slot // TOP_K), the expert
    # (int64) and the tile's output columns.
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
    a_rows = tl.where(slot_ok, slots // TOP_K, 0).to(tl.int64)
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    n_ok = offs_n < N
    return slots, slot_ok, a_rows, expert, offs_n, n_ok


@triton.jit
def moe_store(
    c_ptr,
    acc,
    slots,
    slot_ok,
    offs_n,
    n_ok,
    topk_weights_ptr,
    stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr,
):
    # The shared epilogue: x routed weight (the down projection), store the tile's valid rows.
    if MUL_ROUTED_WEIGHT:
        rw = tl.load(topk_weights_ptr + slots, mask=slot_ok, other=0.0)
        acc = acc * rw[:, None]
    c_ptrs = c_ptr + slots.to(tl.int64)[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=slot_ok[:, None] & n_ok[None, :])


@triton.jit
def fused_moe_kernel(
    a_ptr,
    b_ptr,
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
    stride_cm,
    MUL_ROUTED_WEIGHT: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # C[slot, :] = A[slot // TOP_K, :] @ B[expert(slot)].T  (x routed weight for the down proj)
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
    offs_k = tl.arange(0, BLOCK_SIZE_K)
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
    moe_store(
        c_ptr, acc, slots, slot_ok, offs_n, n_ok, topk_weights_ptr, stride_cm, MUL_ROUTED_WEIGHT
    )


# (signature, constexprs): what `triton.compile`'s ASTSource takes (the AOT check, aot_worker.py).
AotSignature = tuple[dict[str, str], dict[str, int]]


def moe_constexprs(config: dict[str, int], down: bool) -> dict[str, int]:
    """The constexpr arguments every MoE kernel here takes, for one config and projection."""
    return {
        # The down projection reads one row per slot and applies the routed weight.
        "MUL_ROUTED_WEIGHT": down,
        "TOP_K": 1 if down else TOP_K,
        "BLOCK_SIZE_M": config["BLOCK_SIZE_M"],
        "BLOCK_SIZE_N": config["BLOCK_SIZE_N"],
        "BLOCK_SIZE_K": config["BLOCK_SIZE_K"],
        "GROUP_SIZE_M": config["GROUP_SIZE_M"],
    }


def with_constexprs(signature: dict[str, str], config: dict[str, int], down: bool) -> AotSignature:
    """(signature + the constexpr slots, constexprs): what `triton.compile`'s ASTSource takes."""
    constexprs = moe_constexprs(config, down)
    return {**signature, **dict.fromkeys(constexprs, "constexpr")}, constexprs


def aot_signature(config: dict[str, int], down: bool = False) -> AotSignature:
    """(signature, constexprs) for compiling this kernel ahead of time with `config`."""
    return with_constexprs(
        {
            "a_ptr": "*bf16",
            "b_ptr": "*bf16",
            "c_ptr": "*bf16",
            "topk_weights_ptr": "*fp32",
            "sorted_token_ids_ptr": "*i32",
            "expert_ids_ptr": "*i32",
            "num_tokens_post_padded_ptr": "*i32",
            "N": "i32",
            "K": "i32",
            "num_valid_tokens": "i32",
            "stride_am": "i32",
            "stride_be": "i32",
            "stride_bn": "i32",
            "stride_cm": "i32",
        },
        config,
        down,
    )


def moe_align(topk_ids: Tensor, block_m: int, n_experts: int) -> tuple[Tensor, Tensor, Tensor]:
    """Sort (token, slot) pairs by expert, pad each expert's run to block_m.

    Returns (sorted_slot_ids, expert_ids per block, num_tokens_post_padded [1]); padding slots
    hold M*top_k (out of range, masked in the kernel). Plain torch: the decode batch is small.
    """
    import torch

    flat = (
        topk_ids.flatten().to(torch.int64).cpu()
    )  # host-side; callers move the result to the device
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


@dataclass(frozen=True)
class Launch:
    """What every MoE wrapper here hands its kernel besides the weights (see `plan_launch`)."""

    sorted_ids: Tensor
    expert_ids: Tensor
    n_post: Tensor
    out: Tensor
    topk_weights: Tensor  # fp32 [M, top_k], ones when the projection applies no routed weight
    grid: tuple[int]
    n_valid: int
    kwargs: dict[str, int]  # the constexprs plus num_warps / num_stages


def plan_launch(
    a: Tensor,
    topk_ids: Tensor,
    n_experts: int,
    n: int,
    config: dict[str, int],
    topk_weights: Tensor | None = None,
    a_per_slot: bool = False,
) -> Launch:
    """Host side shared by the MoE wrappers: routing (`moe_align`), the output [M * top_k, N] in
    a's dtype, the routed weights, the grid and the kernel keyword arguments."""
    import torch

    n_tokens, top_k = topk_ids.shape
    sorted_ids, expert_ids, n_post = moe_align(topk_ids, config["BLOCK_SIZE_M"], n_experts)
    sorted_ids, expert_ids, n_post = (t.to(a.device) for t in (sorted_ids, expert_ids, n_post))
    out = torch.zeros((n_tokens * top_k, n), dtype=a.dtype, device=a.device)
    weights = (
        topk_weights if topk_weights is not None else torch.ones(n_tokens, top_k, device=a.device)
    )
    grid = (
        triton.cdiv(sorted_ids.numel(), config["BLOCK_SIZE_M"])
        * triton.cdiv(n, config["BLOCK_SIZE_N"]),
    )
    kwargs = {
        **moe_constexprs(config, topk_weights is not None),
        "TOP_K": 1 if a_per_slot else top_k,
        "num_warps": config["num_warps"],
        "num_stages": config["num_stages"],
    }
    return Launch(
        sorted_ids,
        expert_ids,
        n_post,
        out,
        weights.to(torch.float32).contiguous(),
        grid,
        n_tokens * top_k,
        kwargs,
    )


def grouped_gemm(
    a: Tensor,
    w: Tensor,
    topk_ids: Tensor,
    config: dict[str, int],
    topk_weights: Tensor | None = None,
    a_per_slot: bool = False,
) -> Tensor:
    """out[slot] = a[row(slot)] @ w[topk_ids.flat[slot]].T  -> [M * top_k, N].

    a [M, K] (one row per token) or, with a_per_slot, [M * top_k, K] (one row per slot, as the
    down projection sees it); w [E, N, K]; optional topk_weights [M, top_k] multiply each slot.
    """
    n_experts, n, k = w.shape
    p = plan_launch(a, topk_ids, n_experts, n, config, topk_weights, a_per_slot)
    fused_moe_kernel[p.grid](
        a,
        w,
        p.out,
        p.topk_weights,
        p.sorted_ids,
        p.expert_ids,
        p.n_post,
        n,
        k,
        p.n_valid,
        a.stride(0),
        w.stride(0),
        w.stride(1),
        p.out.stride(0),
        **p.kwargs,
    )
    return p.out
