"""Correctness of every shipped config under Triton's CPU interpreter, against the torch references.

Used by the tests and by `kernels build` (run as `python -m dsv4ops.kernels.interp_check`, which
prints one JSON object), so the manifest records what was checked and with which torch/triton.

Shapes: attention runs the full DSV4-Flash per-rank decode shape (16 heads at TP4, head dim 512,
128 SWA rows + 512 top-k rows, FP8 KV) for a few requests with padding. The MoE runs a reduced
shape (E=8 experts, hidden 256, intermediate 64 per rank instead of 256/4096/512) because the
interpreter executes every program in numpy; the launch configs are the shipped ones. The NVFP4
MoE (fused_moe_nvfp4_*) and the MXFP4 MoE (fused_moe_mxfp4_*) run the same reduced shape with
weights quantized by the torch reference quantizers, against the reference GEMM over the
dequantized weights. The full shapes (E=256, top-6, hidden 4096, intermediate 2048 / TP4 = 512
per rank, w13 and w2) and every bucket's batch size run in benchmarks/kernels_gpu.py on a GPU.
The FP4 `tl.dot_scaled` kernels (catalog.AOT_ONLY) are not run here: the interpreter computes
NVFP4 dot_scaled wrongly and 3.7.1's cannot run dot_scaled at all (reference §3.5, gotcha 6).
"""

from __future__ import annotations

import json
import sys

from dsv4ops.clock import SystemClock
from dsv4ops.kernels import interpreter
from dsv4ops.kernels.catalog import AOT_ONLY_WHY

_CLOCK = SystemClock()
ATTN_SHAPE = {"batch": 2, "heads": 16, "swa": 128, "topk": 512, "pool": 1024}
MOE_SHAPE = {"tokens": 3, "experts": 8, "top_k": 6, "hidden": 256, "inter": 64}
# bf16 output rounding (8 bits of mantissa) on values of magnitude ~1-4, plus bf16 P in PV.
ATTN_ATOL, MOE_RTOL = 2e-2, 1e-2


def _attn_case(config: dict[str, int], seed: int) -> dict[str, float | bool]:
    import torch

    from dsv4ops.kernels.sources.reference import quantize_kv, sparse_decode_attn_ref
    from dsv4ops.kernels.sources.sparse_decode_attn import sparse_decode_attn

    g = torch.Generator().manual_seed(seed)
    s = ATTN_SHAPE
    swa = quantize_kv(torch.randn(s["pool"], 512, generator=g) * 2)
    cmp = quantize_kv(torch.randn(s["pool"], 512, generator=g) * 2)
    swa_idx = torch.randint(0, s["pool"], (s["batch"], s["swa"]), generator=g, dtype=torch.int32)
    cmp_idx = torch.randint(0, s["pool"], (s["batch"], s["topk"]), generator=g, dtype=torch.int32)
    swa_idx[0, 77:] = -1  # a short sequence: SWA window not yet full
    cmp_idx[0, 300:] = -1  # fewer than 512 compressed rows
    cmp_idx[1, :] = -1  # no compressed rows at all (early decode)
    q = (torch.randn(s["batch"], s["heads"], 512, generator=g) * 0.3).to(torch.bfloat16)
    sink = torch.randn(s["heads"], generator=g)
    out = sparse_decode_attn(q, swa, swa_idx, cmp, cmp_idx, sink, config)
    ref = sparse_decode_attn_ref(q, swa, swa_idx, cmp, cmp_idx, sink)
    err = (out.float() - ref).abs().max().item()
    return {"max_abs_err": err, "tolerance": ATTN_ATOL, "ok": err <= ATTN_ATOL}


def _moe_case(kernel: str, config: dict[str, int], seed: int) -> dict[str, float | bool]:
    import torch

    from dsv4ops.kernels.sources.moe_grouped_gemm import grouped_gemm
    from dsv4ops.kernels.sources.moe_mxfp4 import grouped_gemm_mxfp4
    from dsv4ops.kernels.sources.moe_nvfp4 import grouped_gemm_nvfp4
    from dsv4ops.kernels.sources.reference import (
        grouped_gemm_mxfp4_ref,
        grouped_gemm_nvfp4_ref,
        grouped_gemm_ref,
        quantize_mxfp4,
        quantize_nvfp4,
    )

    g = torch.Generator().manual_seed(seed)
    s = MOE_SHAPE
    ids = torch.stack(
        [torch.randperm(s["experts"], generator=g)[: s["top_k"]] for _ in range(s["tokens"])]
    )
    ids = ids.to(torch.int32)
    if kernel.endswith("_up"):  # w13: [E, 2 * inter, hidden], one input row per token
        a = torch.randn(s["tokens"], s["hidden"], generator=g).to(torch.bfloat16)
        w = (torch.randn(s["experts"], 2 * s["inter"], s["hidden"], generator=g) / 8).to(
            torch.bfloat16
        )
        weights, per_slot = None, False
    else:  # w2: [E, hidden, inter], one input row per (token, slot)
        a = torch.randn(s["tokens"] * s["top_k"], s["inter"], generator=g).to(torch.bfloat16)
        w = (torch.randn(s["experts"], s["hidden"], s["inter"], generator=g) / 8).to(torch.bfloat16)
        weights, per_slot = torch.rand(s["tokens"], s["top_k"], generator=g), True
    if kernel.startswith("fused_moe_nvfp4_"):  # NVFP4 weights, reference over their dequant
        q = quantize_nvfp4(w)
        out = grouped_gemm_nvfp4(a, *q, ids, config, topk_weights=weights, a_per_slot=per_slot)
        ref = grouped_gemm_nvfp4_ref(a, *q, ids, weights, a_per_slot=per_slot)
    elif kernel.startswith("fused_moe_mxfp4_"):  # MXFP4 weights, reference over their dequant
        qm = quantize_mxfp4(w)
        out = grouped_gemm_mxfp4(a, *qm, ids, config, topk_weights=weights, a_per_slot=per_slot)
        ref = grouped_gemm_mxfp4_ref(a, *qm, ids, weights, a_per_slot=per_slot)
    else:
        out = grouped_gemm(a, w, ids, config, topk_weights=weights, a_per_slot=per_slot)
        ref = grouped_gemm_ref(a, w, ids, weights, a_per_slot=per_slot)
    rel = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    return {"max_rel_err": rel, "tolerance": MOE_RTOL, "ok": rel <= MOE_RTOL}


def run_case(kernel: str, config: dict[str, int], seed: int = 0) -> dict[str, object]:
    """One kernel x config against its reference; returns the errors, tolerance and ok."""
    if kernel in AOT_ONLY_WHY:
        raise ValueError(
            f"{kernel}: tl.dot_scaled cannot be checked under the interpreter: "
            f"{AOT_ONLY_WHY[kernel]}; it is checked by the sm_120 AOT compile only"
        )
    interpreter.enable()
    t0 = _CLOCK.monotonic()
    result = (
        _attn_case(config, seed)
        if kernel == "sparse_decode_attn"
        else _moe_case(kernel, config, seed)
    )
    return {
        "kernel": kernel,
        "config": config,
        **result,
        "seconds": round(_CLOCK.monotonic() - t0, 2),
    }


def versions() -> dict[str, str]:
    import torch
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__}


def main(argv: list[str]) -> int:
    """argv: a JSON file of [[kernel, config], ...]; prints {torch, triton, cases, passed}."""
    interpreter.enable()
    with open(argv[0]) as f:
        jobs = json.load(f)
    cases = [run_case(kernel, cfg) for kernel, cfg in jobs]
    sys.stdout.write(
        json.dumps({**versions(), "cases": cases, "passed": all(c["ok"] for c in cases)}) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
