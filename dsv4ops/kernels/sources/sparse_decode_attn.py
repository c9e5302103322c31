"""Sparse decode attention for DSV4-Flash CSA layers (one fused Triton kernel).

Per request and per block of query heads: gather <=128 sliding-window rows and <=512 top-k
compressed rows (index -1 = padding) from two FP8 KV pools, dequantize in registers, QK^T,
online softmax that also merges a per-head attention-sink logit, then PV. MQA with one 512-wide
KV head and K = V ("absorbed K=V"), as in SGLang's dsv4 backend (see
shared/reference/dsv4-decode-kernels.md §1.3).

KV pool layout (values identical to SGLang's packed 584-byte row, stored as three tensors):
  nope  [T, 448] float8_e4m3fn   scaled by 2**(scale - 127), one UE8M0 scale per 64 dims
  rope  [T, 64]  bfloat16        not scaled
  scale [T, 7]   uint8 (UE8M0)
The inverse RoPE on the output's rope slice happens after this kernel (vLLM's `_apply_inv_rope_to_o`)
and is not part of it.

This module imports only triton at top level so the sm_120 ahead-of-time compile check runs in a
venv without torch; the launcher imports torch lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    from torch import Tensor


D_NOPE = 448
D_ROPE = 64
HEAD_DIM = D_NOPE + D_ROPE
N_SCALES = D_NOPE // 64
SWA_ROWS = 128
TOPK = 512


@triton.jit
def _load_kv_block(
    nope_ptr,
    rope_ptr,
    scale_ptr,
    rows,
    row_ok,
    offs_d,
    D_NOPE: tl.constexpr,
    D_ROPE: tl.constexpr,
    N_SCALES: tl.constexpr,
):
    # One [BLOCK_T, 512] tile: FP8 nope dims dequantized by their UE8M0 tile scale, BF16 rope dims as is.
    rows64 = tl.where(row_ok, rows, 0).to(tl.int64)
    is_nope = offs_d < D_NOPE
    m_nope = row_ok[:, None] & is_nope[None, :]
    m_rope = row_ok[:, None] & (offs_d >= D_NOPE)[None, :]
    nope = tl.load(nope_ptr + rows64[:, None] * D_NOPE + offs_d[None, :], mask=m_nope, other=0.0)
    scale = tl.load(
        scale_ptr + rows64[:, None] * N_SCALES + (offs_d // 64)[None, :], mask=m_nope, other=127
    )
    nope = nope.to(tl.float32) * tl.exp2(scale.to(tl.float32) - 127.0)
    rope = tl.load(
        rope_ptr + rows64[:, None] * D_ROPE + (offs_d - D_NOPE)[None, :], mask=m_rope, other=0.0
    )
    return tl.where(is_nope[None, :], nope, rope.to(tl.float32)).to(tl.bfloat16)


@triton.jit
def _online_softmax_step(q, kv, row_ok, m_i, l_i, acc, sm_scale):
    s = tl.dot(q, tl.trans(kv)) * sm_scale
    s = tl.where(row_ok[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # A block (or everything so far) may be all padding: keep exp() finite.
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp(s - m_safe[:, None])
    alpha = tl.exp(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), kv)
    return m_new, l_i, acc


@triton.jit
def sparse_decode_attn_kernel(
    q_ptr,
    out_ptr,
    sink_ptr,
    swa_nope,
    swa_rope,
    swa_scale,
    swa_idx,
    cmp_nope,
    cmp_rope,
    cmp_scale,
    cmp_idx,
    n_heads,
    sm_scale,
    SWA_ROWS: tl.constexpr,
    TOPK: tl.constexpr,
    D_NOPE: tl.constexpr,
    D_ROPE: tl.constexpr,
    N_SCALES: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    D: tl.constexpr = D_NOPE + D_ROPE
    b = tl.program_id(0)
    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = offs_h < n_heads
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, BLOCK_T)
    q_rows = (b * n_heads + offs_h).to(tl.int64)
    q = tl.load(q_ptr + q_rows[:, None] * D + offs_d[None, :], mask=h_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    for t0 in range(0, SWA_ROWS, BLOCK_T):
        rows = tl.load(swa_idx + b * SWA_ROWS + t0 + offs_t)
        ok = rows >= 0
        kv = _load_kv_block(
            swa_nope, swa_rope, swa_scale, rows, ok, offs_d, D_NOPE, D_ROPE, N_SCALES
        )
        m_i, l_i, acc = _online_softmax_step(q, kv, ok, m_i, l_i, acc, sm_scale)
    for t0 in range(0, TOPK, BLOCK_T):
        rows = tl.load(cmp_idx + b * TOPK + t0 + offs_t)
        ok = rows >= 0
        kv = _load_kv_block(
            cmp_nope, cmp_rope, cmp_scale, rows, ok, offs_d, D_NOPE, D_ROPE, N_SCALES
        )
        m_i, l_i, acc = _online_softmax_step(q, kv, ok, m_i, l_i, acc, sm_scale)

    # The sink is one extra logit per head with no value row: it only grows the denominator.
    sink = tl.load(sink_ptr + offs_h, mask=h_ok, other=0.0).to(tl.float32)
    m_f = tl.maximum(m_i, sink)
    alpha = tl.exp(m_i - m_f)
    l_i = l_i * alpha + tl.exp(sink - m_f)
    out = acc * (alpha / l_i)[:, None]
    tl.store(
        out_ptr + q_rows[:, None] * D + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=h_ok[:, None],
    )


def aot_signature(
    config: dict[str, int], swa_rows: int = SWA_ROWS, topk: int = TOPK
) -> tuple[dict[str, str], dict[str, int]]:
    """(signature, constexprs) for compiling this kernel ahead of time with `config`."""
    signature = {
        "q_ptr": "*bf16",
        "out_ptr": "*bf16",
        "sink_ptr": "*fp32",
        "swa_nope": "*fp8e4nv",
        "swa_rope": "*bf16",
        "swa_scale": "*u8",
        "swa_idx": "*i32",
        "cmp_nope": "*fp8e4nv",
        "cmp_rope": "*bf16",
        "cmp_scale": "*u8",
        "cmp_idx": "*i32",
        "n_heads": "i32",
        "sm_scale": "fp32",
    }
    constexprs = {
        "SWA_ROWS": swa_rows,
        "TOPK": topk,
        "D_NOPE": D_NOPE,
        "D_ROPE": D_ROPE,
        "N_SCALES": N_SCALES,
        "BLOCK_H": config["BLOCK_H"],
        "BLOCK_T": config["BLOCK_T"],
    }
    for name in constexprs:
        signature[name] = "constexpr"
    return signature, constexprs


def sparse_decode_attn(
    q: Tensor,
    swa: tuple[Tensor, Tensor, Tensor],
    swa_idx: Tensor,
    cmp: tuple[Tensor, Tensor, Tensor],
    cmp_idx: Tensor,
    sink: Tensor,
    config: dict[str, int],
    sm_scale: float | None = None,
) -> Tensor:
    """Launch the kernel. q [B, H, 512] bf16; swa/cmp = (nope, rope, scale) pools;
    swa_idx [B, 128] / cmp_idx [B, 512] int32 rows (-1 = pad); sink [H] fp32 -> [B, H, 512] bf16."""
    import torch

    batch, n_heads, dim = q.shape
    if dim != HEAD_DIM:
        raise ValueError(f"head dim must be {HEAD_DIM}, got {dim}")
    swa_rows, topk = swa_idx.shape[1], cmp_idx.shape[1]
    if swa_rows % config["BLOCK_T"] or topk % config["BLOCK_T"]:
        raise ValueError(f"BLOCK_T={config['BLOCK_T']} must divide {swa_rows} and {topk}")
    out = torch.empty_like(q)
    grid = (batch, triton.cdiv(n_heads, config["BLOCK_H"]))
    sparse_decode_attn_kernel[grid](
        q,
        out,
        sink,
        *swa,
        swa_idx,
        *cmp,
        cmp_idx,
        n_heads,
        sm_scale if sm_scale is not None else dim**-0.5,
        SWA_ROWS=swa_rows,
        TOPK=topk,
        D_NOPE=D_NOPE,
        D_ROPE=D_ROPE,
        N_SCALES=N_SCALES,
        BLOCK_H=config["BLOCK_H"],
        BLOCK_T=config["BLOCK_T"],
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
    return out
