"""Sparse decode attention on SGLang 0.5.23's paged FP8 KV cache, as it is in memory.

The contract is SGLang's sm_120 decode entry point `flash_mla_with_kvcache_sm120(**kwargs) ->
(out, lse)` (sglang/kernels/ops/attention/flash_mla_sm120.py L298, called from
layers/attention/deepseek_v4_backend.py L4335-4360); the semantics are those of its plain-torch
path `_sm120_sparse_decode_fwd` (L136), which tests/kernels/flash_mla_paged_test.py runs from the
pinned wheel next to this kernel.

Cache (`k_cache`, `extra_k_cache`): `(num_pages, page_size, 1, 584)` float8_e4m3fn, a view of
SGLang's `(num_pages, page_bytes)` uint8 pool (deepseek_v4_backend.py L4189), page_bytes =
ceil(page_size * 584 / 576) * 576 = `k_cache.stride(0)`. Inside a page, token t holds 448 FP8 nope
values at `t*576`, 64 bf16 rope values at `t*576 + 448`, and its 7 UE8M0 scales (one per 64 nope
dims; byte b means 2**(b-127)) in the page's footer at `page_size*576 + t*8`
(`_gather_and_dequant`, L50). Indices are token indices (page * page_size + slot), -1 = invalid;
`topk_length[b]` masks positions >= it. The kernel reads those bytes where they lie: no gather
copy, no re-layout.

One program per (query row, block of BLOCK_H heads): online softmax over the main cache's top-k
then the extra (c4/c128) cache's, both dequantized in registers, MQA with K = V (512 dims); the
attention sink is one more logit per head with no value row. `lse` is the log-sum-exp of the real
scores only, without the sink, shape (B, H, s_q), -inf for a row with no valid entry (whose `out`
is 0), exactly as `_sm120_sparse_decode_fwd` returns it. (SGLang's Triton fallback,
flash_mla_sm120_triton.py L325, returns the lse with the sink folded in; the decode caller uses
only `out`, deepseek_v4_backend.py L4360.)

This module imports only triton at top level (the AOT check runs without torch); the launcher
imports torch lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from .sparse_decode_attn import D_NOPE, D_ROPE, HEAD_DIM, _online_softmax_step

if TYPE_CHECKING:
    from collections.abc import Mapping

    from torch import Tensor

BYTES_PER_TOKEN = 584  # 448 FP8 nope + 64 * 2 bf16 rope + 7 scales + 1 pad
DATA_STRIDE = D_NOPE + 2 * D_ROPE  # 576: a token's nope + rope bytes
SCALE_STRIDE = 8  # a token's footer bytes (7 UE8M0 scales + 1 pad)
# One launch config for every decode batch size: the grid grows with the tokens, the tile stays.
# 8 warps: at 4 the [16, 512] fp32 accumulator plus the paged addressing spill on sm_120 (255
# registers + 120 B stack, Triton 3.8.0); at 8 it holds in 244 (the AOT check, catalog.FIXED_CONFIGS).
CONFIG = {"BLOCK_H": 16, "BLOCK_T": 16, "num_warps": 8, "num_stages": 2}


@triton.jit
def _load_paged_block(
    fp8_ptr,
    u8_ptr,
    bf16_ptr,
    idx,
    ok,
    page_size,
    page_bytes,
    offs_d,
    D_NOPE: tl.constexpr,
    DATA_STRIDE: tl.constexpr,
    SCALE_STRIDE: tl.constexpr,
):
    # [BLOCK_T, 512] bf16 rows for token indices `idx` (where `ok`), read in place from the pages.
    safe = tl.where(ok, idx, 0).to(tl.int64)
    page_base = (safe // page_size) * page_bytes
    slot = safe % page_size
    data = page_base + slot * DATA_STRIDE
    is_nope = offs_d < D_NOPE
    m_nope = ok[:, None] & is_nope[None, :]
    m_rope = ok[:, None] & (offs_d >= D_NOPE)[None, :]
    nope = tl.load(fp8_ptr + data[:, None] + offs_d[None, :], mask=m_nope, other=0.0)
    footer = page_base + page_size.to(tl.int64) * DATA_STRIDE + slot * SCALE_STRIDE
    scale = tl.load(u8_ptr + footer[:, None] + (offs_d // 64)[None, :], mask=m_nope, other=127)
    # FP8 x 2**k is exact in fp32; the bf16 cast rounds as SGLang's dequant does.
    nope = nope.to(tl.float32) * tl.exp2(scale.to(tl.float32) - 127.0)
    # The rope bytes start at an even offset (576 * slot + 448), so a bf16 view of the same
    # memory addresses them by half the byte offset.
    rope = tl.load(
        bf16_ptr + ((data + D_NOPE) // 2)[:, None] + (offs_d - D_NOPE)[None, :],
        mask=m_rope,
        other=0.0,
    )
    return tl.where(is_nope[None, :], nope, rope.to(tl.float32)).to(tl.bfloat16)


@triton.jit
def _paged_pass(
    q,
    m_i,
    l_i,
    acc,
    fp8_ptr,
    u8_ptr,
    bf16_ptr,
    idx_ptr,
    stride_it,
    topk,
    n_valid,
    page_size,
    page_bytes,
    sm_scale,
    offs_d,
    offs_t,
    D_NOPE: tl.constexpr,
    DATA_STRIDE: tl.constexpr,
    SCALE_STRIDE: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    for t0 in range(0, topk, BLOCK_T):
        t = t0 + offs_t
        idx = tl.load(idx_ptr + t * stride_it, mask=t < topk, other=-1)
        ok = (idx >= 0) & (t < n_valid)
        kv = _load_paged_block(
            fp8_ptr,
            u8_ptr,
            bf16_ptr,
            idx,
            ok,
            page_size,
            page_bytes,
            offs_d,
            D_NOPE,
            DATA_STRIDE,
            SCALE_STRIDE,
        )
        m_i, l_i, acc = _online_softmax_step(q, kv, ok, m_i, l_i, acc, sm_scale)
    return m_i, l_i, acc


@triton.jit
def _finish_row(
    out_ptr,
    lse_ptr,
    sink_ptr,
    m_i,
    l_i,
    acc,
    row,
    b,
    s,
    s_q,
    n_heads,
    offs_h,
    h_ok,
    offs_d,
    D: tl.constexpr,
    HAS_SINK: tl.constexpr,
):
    # lse of the real scores (natural log); -inf where nothing was valid (l_i == 0).
    lonely = l_i == 0.0
    lse = tl.where(lonely, float("-inf"), m_i + tl.log(tl.where(lonely, 1.0, l_i)))
    if HAS_SINK:
        # The sink only grows the denominator; taken in the frame of max(m, sink) so neither
        # exp overflows, and a row with nothing valid gets 0 * 0 / 1 = 0.
        sink = tl.load(sink_ptr + offs_h, mask=h_ok, other=0.0).to(tl.float32)
        m_f = tl.maximum(m_i, sink)
        alpha = tl.exp(m_i - m_f)
        norm = alpha / (l_i * alpha + tl.exp(sink - m_f))
    else:
        norm = 1.0 / tl.where(lonely, 1.0, l_i)
    out = acc * norm[:, None]
    out_rows = (row.to(tl.int64) * n_heads + offs_h) * D
    tl.store(
        out_ptr + out_rows[:, None] + offs_d[None, :],
        out.to(out_ptr.dtype.element_ty),
        mask=h_ok[:, None],
    )
    # lse is (B, H, s_q) contiguous: what SGLang returns (as a permuted view) without a copy.
    tl.store(lse_ptr + (b * n_heads + offs_h) * s_q + s, lse, mask=h_ok)


@triton.jit
def flash_mla_paged_kernel(
    q_ptr,
    out_ptr,
    lse_ptr,
    sink_ptr,
    fp8_ptr,
    u8_ptr,
    bf16_ptr,
    idx_ptr,
    len_ptr,
    x_fp8_ptr,
    x_u8_ptr,
    x_bf16_ptr,
    x_idx_ptr,
    x_len_ptr,
    s_q,
    n_heads,
    topk,
    x_topk,
    page_size,
    page_bytes,
    x_page_size,
    x_page_bytes,
    sm_scale,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_ib,
    stride_is,
    stride_it,
    stride_xb,
    stride_xs,
    stride_xt,
    HAS_LEN: tl.constexpr,
    HAS_EXTRA: tl.constexpr,
    HAS_X_LEN: tl.constexpr,
    HAS_SINK: tl.constexpr,
    D_NOPE: tl.constexpr,
    D: tl.constexpr,
    DATA_STRIDE: tl.constexpr,
    SCALE_STRIDE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,
):
    row = tl.program_id(0)  # b * s_q + s
    b, s = row // s_q, row % s_q
    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = offs_h < n_heads
    offs_d, offs_t = tl.arange(0, D), tl.arange(0, BLOCK_T)
    q_base = b.to(tl.int64) * stride_qb + s.to(tl.int64) * stride_qs
    q_rows = q_base + offs_h.to(tl.int64) * stride_qh
    q = tl.load(q_ptr + q_rows[:, None] + offs_d[None, :], mask=h_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    n_valid = topk
    if HAS_LEN:
        n_valid = tl.load(len_ptr + b)
    m_i, l_i, acc = _paged_pass(
        q, m_i, l_i, acc, fp8_ptr, u8_ptr, bf16_ptr,
        idx_ptr + b.to(tl.int64) * stride_ib + s.to(tl.int64) * stride_is, stride_it,
        topk, n_valid, page_size, page_bytes, sm_scale, offs_d, offs_t,
        D_NOPE, DATA_STRIDE, SCALE_STRIDE, BLOCK_T,
    )  # fmt: skip
    if HAS_EXTRA:
        x_valid = x_topk
        if HAS_X_LEN:
            x_valid = tl.load(x_len_ptr + b)
        m_i, l_i, acc = _paged_pass(
            q, m_i, l_i, acc, x_fp8_ptr, x_u8_ptr, x_bf16_ptr,
            x_idx_ptr + b.to(tl.int64) * stride_xb + s.to(tl.int64) * stride_xs, stride_xt,
            x_topk, x_valid, x_page_size, x_page_bytes, sm_scale, offs_d, offs_t,
            D_NOPE, DATA_STRIDE, SCALE_STRIDE, BLOCK_T,
        )  # fmt: skip

    _finish_row(
        out_ptr, lse_ptr, sink_ptr, m_i, l_i, acc, row, b, s, s_q, n_heads, offs_h, h_ok, offs_d,
        D, HAS_SINK,
    )  # fmt: skip


def aot_signature(config: dict[str, int]) -> tuple[dict[str, str], dict[str, int]]:
    """(signature, constexprs) to compile this kernel ahead of time with `config`, as SGLang's
    decode calls it (deepseek_v4_backend.py L4335-4360): int32 indices and lengths, the extra
    cache and an fp32 sink all present (the variant with the most to hold in registers)."""
    kinds = {"fp8": "*fp8e4nv", "u8": "*u8", "bf16": "*bf16", "idx": "*i32", "len": "*i32"}
    signature = {"q_ptr": "*bf16", "out_ptr": "*bf16", "lse_ptr": "*fp32", "sink_ptr": "*fp32"}
    signature |= {f"{x}{k}_ptr": t for x in ("", "x_") for k, t in kinds.items()}
    ints = "s_q n_heads topk x_topk page_size page_bytes x_page_size x_page_bytes".split()
    signature |= {**dict.fromkeys(ints, "i32"), "sm_scale": "fp32"}
    signature |= {f"stride_{s}": "i32" for s in "qb qs qh ib is it xb xs xt".split()}
    constexprs = dict.fromkeys(("HAS_LEN", "HAS_EXTRA", "HAS_X_LEN", "HAS_SINK"), 1)
    constexprs |= {"D_NOPE": D_NOPE, "D": HEAD_DIM, "DATA_STRIDE": DATA_STRIDE}
    constexprs |= {"SCALE_STRIDE": SCALE_STRIDE, "BLOCK_H": config["BLOCK_H"]}
    constexprs["BLOCK_T"] = config["BLOCK_T"]
    return signature | dict.fromkeys(constexprs, "constexpr"), constexprs


def _cache_views(cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """fp8 / uint8 / bf16 views of the pages `cache` spans: the same memory, nothing copied."""
    import torch

    pages, page_size = cache.shape[0], cache.shape[1]
    span = (pages - 1) * cache.stride(0) + page_size * BYTES_PER_TOKEN
    raw = cache.as_strided((span,), (1,)).view(torch.uint8)
    return raw.view(torch.float8_e4m3fn), raw, raw.view(torch.bfloat16)


def _tensor(kwargs: Mapping[str, object], name: str) -> Tensor | None:
    import torch

    value = kwargs.get(name)
    return value if isinstance(value, torch.Tensor) else None


def uncovered(kwargs: Mapping[str, object]) -> str | None:
    """Why this kernel cannot take these `flash_mla_with_kvcache_sm120` arguments, or None."""
    import torch

    q = _tensor(kwargs, "q")
    if q is None or q.ndim != 4 or q.dtype != torch.bfloat16 or q.shape[-1] != HEAD_DIM:
        return f"q must be a (B, s_q, H, {HEAD_DIM}) bf16 tensor"
    if q.stride(-1) != 1:
        return "q's last dimension must be contiguous"
    if kwargs.get("head_dim_v") != HEAD_DIM:
        return f"head_dim_v must be {HEAD_DIM}"
    for cache_name, index_name in (
        ("k_cache", "indices"),
        ("extra_k_cache", "extra_indices_in_kvcache"),
    ):
        cache, indices = _tensor(kwargs, cache_name), _tensor(kwargs, index_name)
        if cache_name == "extra_k_cache" and (cache is None or indices is None):
            continue  # SGLang's reference ignores an extra cache without indices (L162)
        if cache is None or not _is_v4_pages(cache):
            return f"{cache_name} is not the V4 paged layout (P, page, 1, {BYTES_PER_TOKEN}) FP8"
        if indices is None or indices.ndim != 3 or tuple(indices.shape[:2]) != tuple(q.shape[:2]):
            return f"{index_name} must be (B, s_q, topk) token indices"
    return None


def _is_v4_pages(c: Tensor) -> bool:
    # V4.1's 528- and 288-byte layouts and anything not a page-strided view go to SGLang.
    return bool(  # torch is Any to mypy (pyproject.toml): the comparison chain is its values
        c.ndim == 4
        and c.element_size() == 1
        and c.shape[2] == 1
        and c.shape[3] == BYTES_PER_TOKEN
        and c.stride(3) == 1
        and c.stride(1) == BYTES_PER_TOKEN
        and c.stride(0) % 2 == 0
        and c.stride(0) >= c.shape[1] * BYTES_PER_TOKEN
    )


class _Paged:
    """One paged cache with its (B, s_q, topk) token indices and optional (B,) valid lengths."""

    def __init__(self, cache: Tensor, indices: Tensor, lengths: Tensor | None) -> None:
        self.views = _cache_views(cache)
        self.indices, self.lengths = indices, lengths
        self.topk = indices.shape[-1]
        self.page_size, self.page_bytes = cache.shape[1], cache.stride(0)
        self.strides = (indices.stride(0), indices.stride(1), indices.stride(2))

    def pointers(self) -> tuple[Tensor, ...]:
        # A missing lengths tensor is never read (HAS_LEN false): any pointer stands in.
        lengths = self.lengths if self.lengths is not None else self.indices
        return (*self.views, self.indices, lengths)


def flash_mla_with_kvcache_sm120(**kwargs: object) -> tuple[Tensor, Tensor]:
    """SGLang's `flash_mla_with_kvcache_sm120(**kwargs) -> (out, lse)` on this kernel.

    out (B, s_q, H, 512) bf16; lse (B, H, s_q) fp32. Raises ValueError for arguments it does not
    cover (`uncovered`): the plugin hands those to SGLang's own function."""
    import torch

    why = uncovered(kwargs)
    q, cache, indices = (_tensor(kwargs, n) for n in ("q", "k_cache", "indices"))
    if why is not None or q is None or cache is None or indices is None:
        raise ValueError(why)
    batch, s_q, n_heads, dim = q.shape
    out = torch.empty((batch, s_q, n_heads, dim), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, n_heads, s_q), dtype=torch.float32, device=q.device)
    main = _Paged(cache, indices, _tensor(kwargs, "topk_length"))
    x_cache, x_indices = (
        _tensor(kwargs, "extra_k_cache"),
        _tensor(kwargs, "extra_indices_in_kvcache"),
    )
    extra = None
    if x_cache is not None and x_indices is not None:
        extra = _Paged(x_cache, x_indices, _tensor(kwargs, "extra_topk_length"))
    x = extra or main  # without an extra cache its arguments are never read (HAS_EXTRA false)
    sink = _tensor(kwargs, "attn_sink")
    scale = kwargs.get("softmax_scale")
    grid = (batch * s_q, triton.cdiv(n_heads, CONFIG["BLOCK_H"]))
    flash_mla_paged_kernel[grid](
        q, out, lse, sink if sink is not None else lse,
        *main.pointers(), *x.pointers(),
        s_q, n_heads, main.topk, x.topk, main.page_size, main.page_bytes, x.page_size, x.page_bytes,
        float(scale) if isinstance(scale, int | float) else dim**-0.5,
        q.stride(0), q.stride(1), q.stride(2), *main.strides, *x.strides,
        HAS_LEN=main.lengths is not None,
        HAS_EXTRA=extra is not None,
        HAS_X_LEN=extra is not None and extra.lengths is not None,
        HAS_SINK=sink is not None,
        D_NOPE=D_NOPE, D=HEAD_DIM, DATA_STRIDE=DATA_STRIDE, SCALE_STRIDE=SCALE_STRIDE,
        BLOCK_H=CONFIG["BLOCK_H"], BLOCK_T=CONFIG["BLOCK_T"],
        num_warps=CONFIG["num_warps"], num_stages=CONFIG["num_stages"],
    )  # fmt: skip
    return out, lse
