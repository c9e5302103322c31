"""Plain-torch references for the kernels, and the DSV4 FP8 KV-cache quantizer the tests use.

Each reference computes in fp32 from the same inputs the kernel sees, so a mismatch is the
kernel's (bf16 rounding of P before PV is the only intended difference).
"""

from __future__ import annotations

import torch

from .sparse_decode_attn import D_NOPE, N_SCALES

# A KV pool (nope, rope, scale) and an NVFP4 weight (packed, scale, global scale); an MXFP4
# weight is (packed, scale).
Pool = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Nvfp4Weight = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Mxfp4Weight = tuple[torch.Tensor, torch.Tensor]


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


def sparse_decode_attn_ref(
    q: torch.Tensor,
    swa: Pool,
    swa_idx: torch.Tensor,
    cmp: Pool,
    cmp_idx: torch.Tensor,
    sink: torch.Tensor,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """Gather -> scores (+ sink logit per head) -> softmax -> PV, per request. [B, H, 512] fp32."""
    swa_kv, cmp_kv = dequantize_kv(*swa), dequantize_kv(*cmp)
    scale = sm_scale if sm_scale is not None else q.shape[-1] ** -0.5
    out = torch.zeros(q.shape, dtype=torch.float32)
    for b in range(q.shape[0]):
        rows = [
            swa_kv[swa_idx[b][swa_idx[b] >= 0].long()],
            cmp_kv[cmp_idx[b][cmp_idx[b] >= 0].long()],
        ]
        kv = torch.cat(rows).to(torch.bfloat16).float()
        scores = (q[b].float() @ kv.T) * scale  # [H, rows]
        logits = torch.cat([scores, sink.float()[:, None]], dim=1)  # sink = extra column, no value
        probs = torch.softmax(logits, dim=1)[:, :-1]
        out[b] = probs @ kv
    return out


def grouped_gemm_ref(
    a: torch.Tensor,
    w: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor | None = None,
    a_per_slot: bool = False,
) -> torch.Tensor:
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


def moe_layer_ref(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
) -> torch.Tensor:
    """Routed-expert MoE for M tokens: sum_k w_k * W2[e_k] swiglu(W13[e_k] x). fp32 [M, hidden]."""
    up = grouped_gemm_ref(x, w13, topk_ids)
    down = grouped_gemm_ref(swiglu(up).to(x.dtype), w2, topk_ids, topk_weights, a_per_slot=True)
    return down.view(*topk_ids.shape, -1).sum(dim=1)


# ----------------------------------------------------------------------------- NVFP4 experts
# NVFP4 (NVIDIA's DeepSeek-V4-Flash-NVFP4 conversion, reference §1.1): e2m1 values, one
# FP8-e4m3 scale per 16 values along K, one fp32 global scale per expert weight tensor.
# Layout as kernels/moe_nvfp4.py: packed uint8 [E, N, K/2] (low nibble = even k),
# scales float8_e4m3fn [E, N, K/16], global fp32 [E].

E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # magnitude by code & 7
E2M1_MAX, E4M3_MAX, NVFP4_GROUP = 6.0, 448.0, 16


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes (sign bit 3, magnitude bits 0-2) -> fp32 values."""
    codes = codes.to(torch.int64)
    mag = E2M1_VALUES[codes & 7]
    return torch.where((codes & 8) != 0, -mag, mag)


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """fp32 values (already scaled into [-6, 6]) -> nearest e2m1 code (uint8, 0..15).

    Ties go to the smaller magnitude; -0 encodes as +0.
    """
    mag = x.abs().clamp(max=E2M1_MAX)
    idx = (mag[..., None] - E2M1_VALUES).abs().argmin(dim=-1)
    return (idx | ((x < 0) & (idx > 0)).to(torch.int64) << 3).to(torch.uint8)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., K] codes -> [..., K/2] uint8, element 2j in the low nibble, 2j+1 in the high."""
    c = codes.to(torch.uint8)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_nibbles: [..., K/2] uint8 -> [..., K] codes (uint8)."""
    lo, hi = packed & 0xF, packed >> 4
    return torch.stack([lo, hi], dim=-1).flatten(-2)


def quantize_nvfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[E, N, K] float -> (packed uint8 [E, N, K/2], scales float8_e4m3fn [E, N, K/16], global fp32 [E]).

    ModelOpt's recipe: global = amax(|w_e|) / (6 * 448), block scale = amax(block) / 6 / global
    rounded to e4m3, values = e2m1(w / (scale * global)).
    """
    e, n, k = w.shape
    if k % NVFP4_GROUP:
        raise ValueError(f"K={k} is not a multiple of {NVFP4_GROUP}")
    w = w.float()
    gscale = (w.abs().amax(dim=(1, 2)) / (E2M1_MAX * E4M3_MAX)).clamp_min(1e-30)
    blocks = w.reshape(e, n, k // NVFP4_GROUP, NVFP4_GROUP)
    bscale = (blocks.abs().amax(dim=3) / E2M1_MAX / gscale[:, None, None]).clamp(max=E4M3_MAX)
    bscale = bscale.to(torch.float8_e4m3fn)
    denom = bscale.float() * gscale[:, None, None]
    scaled = torch.where(denom[..., None] > 0, blocks / denom[..., None].clamp_min(1e-30), 0.0)
    codes = e2m1_encode(scaled).reshape(e, n, k)
    return pack_nibbles(codes), bscale, gscale


def dequantize_nvfp4(
    packed: torch.Tensor, scale: torch.Tensor, gscale: torch.Tensor
) -> torch.Tensor:
    """Inverse of quantize_nvfp4: fp32 [E, N, K] = e2m1 * ue4m3 block scale * global scale."""
    values = e2m1_decode(unpack_nibbles(packed))
    factor = scale.float().repeat_interleave(NVFP4_GROUP, dim=-1) * gscale.float()[:, None, None]
    return values * factor


def grouped_gemm_nvfp4_ref(
    a: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    gscale: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor | None = None,
    a_per_slot: bool = False,
) -> torch.Tensor:
    """grouped_gemm_ref over the dequantized NVFP4 weights (same routing semantics), fp32."""
    return grouped_gemm_ref(
        a, dequantize_nvfp4(packed, scale, gscale), topk_ids, topk_weights, a_per_slot
    )


def moe_layer_nvfp4_ref(
    x: torch.Tensor,
    w13: Nvfp4Weight,
    w2: Nvfp4Weight,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
) -> torch.Tensor:
    """moe_layer_ref with NVFP4 experts: w13 / w2 are (packed, scale, global) triples."""
    return moe_layer_ref(x, dequantize_nvfp4(*w13), dequantize_nvfp4(*w2), topk_ids, topk_weights)


# ----------------------------------------------------------------------------- MXFP4 experts
# MXFP4 (OCP Microscaling; the official DSV4 checkpoints' routed experts, reference §1.1): e2m1
# values, one ue8m0 scale byte per 32 values along K, value = e2m1 * 2^(byte - 127), no global
# scale. Layout as kernels/moe_mxfp4.py: packed uint8 [E, N, K/2] (low nibble = even k, as
# NVFP4), scales uint8 [E, N, K/32].

MXFP4_GROUP, E2M1_EMAX, E8M0_BIAS = 32, 2, 127


def e8m0_decode(scale: torch.Tensor) -> torch.Tensor:
    """ue8m0 bytes -> fp32 2^(byte - 127); byte 255 is NaN (OCP MX), byte 0 is 2^-127."""
    b = scale.to(torch.int32)
    return torch.where(b == 255, torch.nan, torch.exp2((b - E8M0_BIAS).double()).float())


def e2m1_encode_rne(x: torch.Tensor) -> torch.Tensor:
    """fp32 values -> e2m1 codes (uint8, 0..15), round to nearest, ties to even, saturating at ±6.

    Per binade the e2m1 grid is evenly spaced (step 0.5 below 2, 1 in [2, 4), 2 in [4, 6]), and
    an even code is an even multiple of the step, so torch.round (half to even) per binade is
    IEEE round-to-nearest-even. -0 and negatives that round to 0 encode as +0.
    """
    mag = x.float().abs().clamp(max=E2M1_MAX)
    step = torch.where(mag < 2, 0.5, torch.where(mag < 4, 1.0, 2.0))
    q = torch.round(mag / step) * step  # exact: mag / step and q are small multiples of 0.5
    idx = (q[..., None] == E2M1_VALUES).to(torch.int64).argmax(dim=-1)
    return (idx | ((x < 0) & (idx > 0)).to(torch.int64) << 3).to(torch.uint8)


def quantize_mxfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., K] float -> (packed uint8 [..., K/2], ue8m0 scales uint8 [..., K/32]).

    OCP MX: per 32-value block the shared exponent is floor(log2(amax)) - 2 (2 = emax of e2m1),
    clamped to [-127, 127] (an all-zero block gets -127, byte 0), stored as exponent + 127; the
    values w / 2^exponent are rounded to nearest-even e2m1, saturating at ±6 (amax / 2^exponent
    lies in [4, 8)). floor(log2) is taken from the float's exponent (frexp), exactly.
    """
    k = w.shape[-1]
    if k % MXFP4_GROUP:
        raise ValueError(f"K={k} is not a multiple of {MXFP4_GROUP}")
    blocks = w.float().reshape(*w.shape[:-1], k // MXFP4_GROUP, MXFP4_GROUP)
    amax = blocks.abs().amax(dim=-1)
    _, exp = torch.frexp(amax)  # amax = m * 2^exp, m in [0.5, 1)
    shared = torch.where(amax > 0, exp - 1 - E2M1_EMAX, -E8M0_BIAS).clamp(-E8M0_BIAS, E8M0_BIAS)
    scaled = torch.ldexp(blocks, -shared[..., None].to(torch.float32))
    codes = e2m1_encode_rne(scaled).reshape(w.shape)
    return pack_nibbles(codes), (shared + E8M0_BIAS).to(torch.uint8)


def dequantize_mxfp4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Inverse of quantize_mxfp4: fp32 [..., K] = e2m1 * 2^(scale byte - 127)."""
    return e2m1_decode(unpack_nibbles(packed)) * e8m0_decode(scale).repeat_interleave(
        MXFP4_GROUP, dim=-1
    )


def grouped_gemm_mxfp4_ref(
    a: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor | None = None,
    a_per_slot: bool = False,
) -> torch.Tensor:
    """grouped_gemm_ref over the dequantized MXFP4 weights (same routing semantics), fp32."""
    return grouped_gemm_ref(a, dequantize_mxfp4(packed, scale), topk_ids, topk_weights, a_per_slot)


def moe_layer_mxfp4_ref(
    x: torch.Tensor,
    w13: Mxfp4Weight,
    w2: Mxfp4Weight,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
) -> torch.Tensor:
    """moe_layer_ref with MXFP4 experts: w13 / w2 are (packed, scale) pairs."""
    return moe_layer_ref(x, dequantize_mxfp4(*w13), dequantize_mxfp4(*w2), topk_ids, topk_weights)
