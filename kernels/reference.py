"""Plain-torch references for the kernels, and the DSV4 FP8 KV-cache quantizer the tests use.

Each reference computes in fp32 from the same inputs the kernel sees, so a mismatch is the
kernel's (bf16 rounding of P before PV is the only intended difference).
"""

from __future__ import annotations

import torch

from kernels.sparse_decode_attn import D_NOPE, N_SCALES


def quantize_kv(kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[T, 512] float -> (nope fp8 [T, 448], rope bf16 [T, 64], UE8M0 scales uint8 [T, 7]).

    One power-of-two scale per 64 nope dims, chosen so the tile's max fits e4m3's 448.
    """
    nope = kv[:, :D_NOPE].float().reshape(kv.shape[0], N_SCALES, 64)
    amax = nope.abs().amax(dim=2).clamp_min(1e-30)
    exp = torch.ceil(torch.log2(amax / 448.0)).clamp(-127, 127)
    scaled = nope / torch.exp2(exp)[:, :, None]
    q_nope = scaled.reshape(kv.shape[0], D_NOPE).to(torch.float8_e4m3fn)
    return q_nope, kv[:, D_NOPE:].to(torch.bfloat16).contiguous(), (exp + 127).to(torch.uint8)


def dequantize_kv(nope: torch.Tensor, rope: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Inverse of quantize_kv: [T, 512] fp32."""
    factor = torch.exp2(scale.float() - 127.0).repeat_interleave(64, dim=1)
    return torch.cat([nope.float() * factor, rope.float()], dim=1)


def sparse_decode_attn_ref(q: torch.Tensor, swa: tuple, swa_idx: torch.Tensor, cmp: tuple,
                           cmp_idx: torch.Tensor, sink: torch.Tensor,
                           sm_scale: float | None = None) -> torch.Tensor:
    """Gather -> scores (+ sink logit per head) -> softmax -> PV, per request. [B, H, 512] fp32."""
    swa_kv, cmp_kv = dequantize_kv(*swa), dequantize_kv(*cmp)
    scale = sm_scale if sm_scale is not None else q.shape[-1] ** -0.5
    out = torch.zeros(q.shape, dtype=torch.float32)
    for b in range(q.shape[0]):
        rows = [swa_kv[swa_idx[b][swa_idx[b] >= 0].long()], cmp_kv[cmp_idx[b][cmp_idx[b] >= 0].long()]]
        kv = torch.cat(rows).to(torch.bfloat16).float()
        scores = (q[b].float() @ kv.T) * scale                         # [H, rows]
        logits = torch.cat([scores, sink.float()[:, None]], dim=1)     # sink = extra column, no value
        probs = torch.softmax(logits, dim=1)[:, :-1]
        out[b] = probs @ kv
    return out


def grouped_gemm_ref(a: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor,
                     topk_weights: torch.Tensor | None = None, a_per_slot: bool = False) -> torch.Tensor:
    """out[slot] = a[row(slot)] @ w[expert(slot)].T (x weight), fp32 [M * top_k, N]."""
    n_tokens, top_k = topk_ids.shape
    out = torch.zeros((n_tokens * top_k, w.shape[1]), dtype=torch.float32)
    for slot, expert in enumerate(topk_ids.flatten().tolist()):
        row = a[slot if a_per_slot else slot // top_k].float()
        out[slot] = w[expert].float() @ row
        if topk_weights is not None:
            out[slot] *= topk_weights.flatten()[slot].float()
    return out


def swiglu(gate_up: torch.Tensor, limit: float = 10.0) -> torch.Tensor:
    """DSV4's clamped SwiGLU on [slots, 2N] -> [slots, N] (swiglu_limit 10.0)."""
    gate, up = gate_up.float().chunk(2, dim=1)
    gate = gate.clamp(max=limit)
    up = up.clamp(-limit, limit)
    return torch.nn.functional.silu(gate) * up


def moe_layer_ref(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor,
                  topk_weights: torch.Tensor) -> torch.Tensor:
    """Routed-expert MoE for M tokens: sum_k w_k * W2[e_k] swiglu(W13[e_k] x). fp32 [M, hidden]."""
    up = grouped_gemm_ref(x, w13, topk_ids)
    down = grouped_gemm_ref(swiglu(up).to(x.dtype), w2, topk_ids, topk_weights, a_per_slot=True)
    return down.view(*topk_ids.shape, -1).sum(dim=1)
