"""Our sparse decode attention against SGLang 0.5.23's own, on a CUDA device: a pass/fail table.

On a GPU machine (never a test dependency, not run in CI):

    python benchmarks/flash_mla_gpu_check.py                 # DSV4-Flash decode shapes, 1..64 tokens
    python benchmarks/flash_mla_gpu_check.py --json > r.json # the same rows as JSON
    python benchmarks/flash_mla_gpu_check.py --cpu           # the script itself, under Triton's
                                                             # interpreter on 2 small cases

Needs torch (CUDA) and triton in the running Python, and the pinned sglang wheel at
.dsv4ops/wheels/ (or $SGLANG_WHEEL): SGLang's references are read from the wheel's files, as
tests/kernels/flash_mla_paged_test.py reads them (testing/kernels.sglang_flash_mla), so no
SGLang install is needed. pytest is not needed either (see _without_pytest).

Per case (tokens x cache shape x sink), on identical CUDA tensors built in SGLang's paged FP8
layout (testing/kernels.decode_kwargs, moved to the device byte for byte):
- ours: kernels/flash_mla_paged.py, compiled for this GPU (dsv4ops_kernel_plugin's kernel);
- SGLang's plain-torch path `_sm120_sparse_decode_fwd` (flash_mla_sm120.py L136): `out` within
  the test's bf16 tolerance (atol 2**-8 * max|v|, rtol 2**-7), `lse` within 1e-3 relative
  (issue 41's bound; the CPU test holds 1e-4);
- SGLang's Triton fallback `flash_mla_sparse_decode_triton` (flash_mla_sm120_triton.py L325):
  the same `out` bound, its lse compared with the sink folded in (as it returns it);
- each one's median time (triton.testing.do_bench) and achieved bandwidth: the bytes a decode
  must read (every gathered token's 584 cache bytes, q) and write (out, lse) over that time.
Exit 0 when every row passes, 1 otherwise. The box's default (FlashInfer's sm_120 CUTLASS
kernel) cannot run off sm_120: that comparison is the A/B's (docs/kernels.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

if TYPE_CHECKING:
    from torch import Tensor

# DSV4-Flash's decode call (deepseek_v4_backend.py L4350-4361): 64 padded heads, 512 dims; the
# main cache is the SWA window (128 per token, page 256), the extra the compressed top-k (512).
# The second shape swaps them: a main cache at top-k 512, as issue 41 asks.
SHAPES = {"swa128+extra512": (128, 512), "main512+extra128": (512, 128)}
TOKENS = (1, 2, 4, 8, 16, 32, 48, 64)
OUT_RTOL, LSE_RTOL = 2**-7, 1e-3
BYTES_PER_TOKEN = 584


def _without_pytest() -> None:
    """testing/kernels.py imports pytest at top for its test-only helpers, which this script
    never calls; a GPU box without pytest gets an empty stand-in so the SGLang loader imports."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        sys.modules["pytest"] = ModuleType("pytest")


def _to(kw: dict[str, Any], device: str) -> dict[str, Any]:
    """The kwargs on `device`; a cache keeps its page stride (a view into a padded pool, as
    SGLang's is), so the pool is moved whole and viewed again."""
    import torch

    out: dict[str, Any] = {}
    for name, value in kw.items():
        if not isinstance(value, torch.Tensor):
            out[name] = value
        elif name.endswith("k_cache"):
            pool = value.as_strided((value.shape[0] * value.stride(0),), (1,))
            out[name] = pool.to(device).as_strided(tuple(value.shape), value.stride())
        else:
            out[name] = value.to(device)
    return out


def _bytes(kw: dict[str, Any]) -> int:
    """What one call must move: each gathered token's cache bytes, q in, out and lse out."""
    q: Tensor = kw["q"]
    gathered = int((kw["indices"] >= 0).sum())
    if "extra_indices_in_kvcache" in kw:
        gathered += int((kw["extra_indices_in_kvcache"] >= 0).sum())
    rows = int(q.numel() // q.shape[-1])  # (token, query, head): one fp32 lse each
    return gathered * BYTES_PER_TOKEN + int(q.numel()) * (2 + 2) + rows * 4  # bf16 q in, out out


def _max_v(sglang: ModuleType, kw: dict[str, Any]) -> float:
    vals = [sglang._gather_and_dequant(kw["k_cache"], kw["indices"].clamp(min=0), 256)]
    if "extra_k_cache" in kw:
        extra = kw["extra_indices_in_kvcache"].clamp(min=0)
        vals.append(sglang._gather_and_dequant(kw["extra_k_cache"], extra, 64))
    return max(float(v.float().abs().max()) for v in vals)


def _errors(
    out: Tensor, lse: Tensor, ref_out: Tensor, ref_lse: Tensor, max_v: float
) -> dict[str, Any]:
    import torch

    diff = (out.float() - ref_out.float()).abs()
    out_ok = bool((diff <= 2**-8 * max_v + OUT_RTOL * ref_out.float().abs()).all())
    both_inf = torch.isneginf(lse) & torch.isneginf(ref_lse)
    rel = ((lse - ref_lse).abs() / ref_lse.abs().clamp(min=1.0)).masked_fill(both_inf, 0.0)
    lse_err = float(rel.nan_to_num(nan=float("inf")).max())
    return {
        "out_max_abs": round(float(diff.max()), 6),
        "lse_max_rel": lse_err,
        "ok": out_ok and lse_err <= LSE_RTOL,
    }


def _args(kw: dict[str, Any]) -> tuple[Any, ...]:
    names = ("q", "k_cache", "indices", "topk_length", "attn_sink", "head_dim_v", "softmax_scale")
    extra = ("extra_k_cache", "extra_indices_in_kvcache", "extra_topk_length")
    return tuple(kw.get(n) for n in (*names, *extra))


def _timed(fn: Any, time_it: bool) -> float | None:
    if not time_it:
        return None
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=50)) * 1e3  # ms -> us


def check_case(
    sglang: ModuleType, shape: str, tokens: int, sink: bool, device: str, seed: int
) -> dict[str, Any]:
    import torch

    from dsv4ops.kernels.sources.flash_mla_paged import flash_mla_with_kvcache_sm120
    from testing.kernels import Case, decode_kwargs

    topk, extra = SHAPES[shape]
    kw = _to(dict(decode_kwargs(Case(tokens, 64, topk, extra, sink=sink), seed)), device)
    max_v = _max_v(sglang, kw)
    out, lse = flash_mla_with_kvcache_sm120(**kw)
    ref_out, ref_lse = sglang._sm120_sparse_decode_fwd(*_args(kw))
    tri_out, tri_lse = sglang.TRITON_FALLBACK.flash_mla_sparse_decode_triton(*_args(kw))
    with_sink = torch.logaddexp(lse, kw["attn_sink"].view(1, -1, 1)) if sink else lse
    time_it = device != "cpu"
    us = {
        "ours": _timed(lambda: flash_mla_with_kvcache_sm120(**kw), time_it),
        "sglang_triton": _timed(
            lambda: sglang.TRITON_FALLBACK.flash_mla_sparse_decode_triton(*_args(kw)), time_it
        ),
        "sglang_torch": _timed(lambda: sglang._sm120_sparse_decode_fwd(*_args(kw)), time_it),
    }
    moved = _bytes(kw)
    return {
        "shape": shape,
        "tokens": tokens,
        "sink": sink,
        "vs_torch": _errors(out, lse, ref_out, ref_lse, max_v),
        "vs_triton": _errors(out, with_sink, tri_out, tri_lse, max_v),
        "us": us,
        "gbps": {k: (round(moved / (v * 1e3), 1) if v else None) for k, v in us.items()},
    }


def _cell(row: dict[str, Any], key: str) -> str:
    r = row[key]
    return f"{'PASS' if r['ok'] else 'FAIL'} {r['out_max_abs']:.2e}/{r['lse_max_rel']:.1e}"


def print_table(rows: list[dict[str, Any]], device: str) -> None:
    print(f"device: {device}   cells: verdict out-max-abs/lse-max-rel; GB/s ours | triton | torch")
    print(f"{'shape':18s} {'tok':>3s} {'sink':4s} {'vs torch ref':24s} {'vs triton':24s} GB/s")
    for r in rows:
        g = r["gbps"]
        speed = " | ".join("-" if g[k] is None else f"{g[k]:.0f}" for k in g)
        ratio = (
            f"  ours/triton {g['ours'] / g['sglang_triton']:.2f}x"
            if g["ours"] and g["sglang_triton"]
            else ""
        )
        print(
            f"{r['shape']:18s} {r['tokens']:3d} {'yes' if r['sink'] else 'no':4s} "
            f"{_cell(r, 'vs_torch'):24s} {_cell(r, 'vs_triton'):24s} {speed}{ratio}"
        )
    bad = sum(not (r["vs_torch"]["ok"] and r["vs_triton"]["ok"]) for r in rows)
    print(f"{len(rows) - bad}/{len(rows)} PASS" + (f", {bad} FAIL" if bad else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="Triton's interpreter, 1 token: checks the script, no speed",
    )
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.cpu:  # before any kernel import: TRITON_INTERPRET is read when @triton.jit runs
        from dsv4ops.kernels.interpreter import enable

        enable()  # also its bf16 tl.dot fix (interpreter.py), or ours reads garbage on a CPU
    _without_pytest()
    import torch

    from testing.kernels import sglang_flash_mla

    device = "cpu" if args.cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run on a GPU machine, or --cpu to check the script", file=sys.stderr)
        return 2
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        sglang = sglang_flash_mla(Path(tmp))
        tokens = [1] if args.cpu else [int(t) for t in args.tokens.split(",")]
        shapes = ["swa128+extra512"] if args.cpu else list(SHAPES)
        rows = [
            check_case(sglang, shape, n, sink, device, seed=n * 2 + sink)
            for shape in shapes
            for n in tokens
            for sink in ((True,) if args.cpu else (True, False))
        ]
    name = "cpu (Triton interpreter)" if args.cpu else torch.cuda.get_device_name()
    if args.json:
        print(json.dumps({"device": name, "rows": rows}, indent=1))
    else:
        print_table(rows, name)
    return 0 if all(r["vs_torch"]["ok"] and r["vs_triton"]["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
