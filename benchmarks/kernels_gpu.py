"""Achieved memory bandwidth of the DSV4 decode kernels, per decode bucket, against the GPU's peak.

On a GPU machine (never needed by the tests):

    python benchmarks/kernels_gpu.py                      # every shipped bucket, full shapes
    python benchmarks/kernels_gpu.py --buckets 1,8,64 --tune --out tuned/   # also time candidates

Full DSV4-Flash per-rank decode shapes: attention 16 heads (64 / TP4), head dim 512, 128 SWA +
512 top-k FP8 KV rows per request plus the sink; MoE 256 experts, top-6, hidden 4096,
intermediate 512 per rank (2048 / TP4), w13 then clamped SwiGLU then w2, with bf16 weights
(`fused_moe`), with NVFP4 weights (`fused_moe_nvfp4`: e2m1 packed 2 per byte, one e4m3 scale
per 16, fp32 global per expert; 0.5625 B per weight) and with MXFP4 weights (`fused_moe_mxfp4`,
the official checkpoint's format: e2m1 packed 2 per byte, one ue8m0 scale byte per 32, no global
scale; 0.5 + 1/32 = 0.53125 B per weight). Bytes are the unique bytes each kernel must
move (KV rows gathered, expert weight slabs and scales of the experts the batch routes to,
activations), so bandwidth = bytes / median time (triton.testing.do_bench, CUDA events) and the
ratio to peak says how far each kernel is from the memory roofline. The NVFP4 and MXFP4
tl.dot_scaled (W4A4) kernels are not benchmarked: they have had no correctness run yet (the CPU
interpreter cannot check them, reference §3.5 gotcha 6).

`--dry-run` (CPU, no GPU): runs the same plumbing on one small bucket under Triton's interpreter
and prints the byte accounting, to check the script itself; it makes no speed claim.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported by main() (a --dry-run needs none of CUDA)
    from torch import Tensor

    from dsv4ops.jsontypes import JSONObject

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Which copy of the kernel sources runs: the package's own, or a deployed package's `kernels/`
# (integration/kernels_box_check.py sets this to "kernels" with the deployed root on sys.path).
KERNEL_PACKAGE = "dsv4ops.kernels.sources"


def kmod(name: str) -> ModuleType:
    return importlib.import_module(f"{KERNEL_PACKAGE}.{name}")


# A kernel's inputs (tensors and sizes; torch is passed in as a module, so they are untyped) and
# one launch config (BLOCK_* sizes, num_warps, num_stages).
Args = tuple[Any, ...]
Config = dict[str, int]

# Peak DRAM bandwidth (bytes/s) by torch.cuda.get_device_name(); override with --peak-gbps.
PEAK_BW = {
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": 1792e9,  # 512-bit GDDR7 @ 28 Gbps
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": 1792e9,
    "NVIDIA H200": 4.8e12,
    "NVIDIA H100 80GB HBM3": 3.35e12,
    "NVIDIA B200": 8.0e12,
}
BOX_DEVICE = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
# Targets (issue 13): % of peak DRAM bandwidth; the MoE target holds at decode M <= 16.
TARGET_PCT = {
    "sparse_decode_attn": 80.0,
    "fused_moe": 70.0,
    "fused_moe_nvfp4": 70.0,
    "fused_moe_mxfp4": 70.0,
}
TARGET_MAX_M = {
    "sparse_decode_attn": None,
    "fused_moe": 16,
    "fused_moe_nvfp4": 16,
    "fused_moe_mxfp4": 16,
}
ATTN_CANDIDATES = [
    {"BLOCK_H": 16, "BLOCK_T": t, "num_warps": w, "num_stages": s}
    for t in (16, 32)
    for w in (4, 8)
    for s in (1, 2, 3)
]
MOE_CANDIDATES = [
    {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": n,
        "BLOCK_SIZE_K": k,
        "GROUP_SIZE_M": 1,
        "num_warps": w,
        "num_stages": s,
    }
    for n in (32, 64)
    for k in (128, 256)
    for w in (4, 8)
    for s in (2, 3)
]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--dry-run", action="store_true", help="CPU plumbing check under the interpreter"
    )
    p.add_argument(
        "--buckets", default=None, help="comma-separated batch sizes (default: shipped keys)"
    )
    p.add_argument("--peak-gbps", type=float, default=None, help="device peak bandwidth in GB/s")
    p.add_argument("--tune", action="store_true", help="time candidate configs, keep the fastest")
    p.add_argument(
        "--out", type=Path, default=None, help="write tuned JSON files here (with --tune)"
    )
    p.add_argument("--json", action="store_true", help="print results as JSON")
    return p.parse_args(argv)


def attn_inputs(
    torch: ModuleType, batch: int, device: str, heads: int = 16, pool: int = 65536
) -> tuple[Args, int]:
    quantize_kv = kmod("reference").quantize_kv

    kv = [quantize_kv(torch.randn(pool, 512)) for _ in range(2)]
    swa, cmp = [tuple(t.to(device) for t in p) for p in kv]
    swa_idx = torch.randint(0, pool, (batch, 128), dtype=torch.int32, device=device)
    cmp_idx = torch.randint(0, pool, (batch, 512), dtype=torch.int32, device=device)
    q = (torch.randn(batch, heads, 512, device=device) * 0.3).to(torch.bfloat16)
    sink = torch.randn(heads, device=device)
    rows = batch * (128 + 512)
    nbytes = rows * (448 + 64 * 2 + 7) + swa_idx.numel() * 4 * 2 + q.numel() * 2 * 2
    return (q, swa, swa_idx, cmp, cmp_idx, sink), nbytes


def moe_inputs(
    torch: ModuleType,
    batch: int,
    device: str,
    experts: int = 256,
    hidden: int = 4096,
    inter: int = 512,
) -> tuple[Args, int]:
    x = torch.randn(batch, hidden, device=device).to(torch.bfloat16)
    w13 = (torch.randn(experts, 2 * inter, hidden, device=device) / 64).to(torch.bfloat16)
    w2 = (torch.randn(experts, hidden, inter, device=device) / 64).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(experts, device=device)[:6] for _ in range(batch)]).to(
        torch.int32
    )
    weights = torch.softmax(torch.randn(batch, 6, device=device), dim=1)
    used = torch.unique(ids).numel()
    nbytes = (
        used * (2 * inter * hidden + hidden * inter) * 2 + batch * 6 * (hidden + 2 * inter) * 2 * 2
    )
    return (x, w13, w2, ids, weights, inter), nbytes


def moe_nvfp4_inputs(
    torch: ModuleType,
    batch: int,
    device: str,
    experts: int = 256,
    hidden: int = 4096,
    inter: int = 512,
) -> tuple[Args, int]:
    """Random NVFP4 weights made directly in the packed format (quantizing 256 full experts on
    the host would take minutes and tens of GB): every byte value, e4m3 scales in [0.5, 1]."""
    x = torch.randn(batch, hidden, device=device).to(torch.bfloat16)

    def weights(n: int, k: int) -> Args:
        packed = torch.randint(0, 256, (experts, n, k // 2), dtype=torch.uint8, device=device)
        scale = (0.5 + 0.5 * torch.rand(experts, n, k // 16, device=device)).to(torch.float8_e4m3fn)
        gscale = torch.full((experts,), 1 / 64, device=device)
        return packed, scale, gscale

    w13, w2 = weights(2 * inter, hidden), weights(hidden, inter)
    ids = torch.stack([torch.randperm(experts, device=device)[:6] for _ in range(batch)]).to(
        torch.int32
    )
    topk = torch.softmax(torch.randn(batch, 6, device=device), dim=1)
    used = torch.unique(ids).numel()
    per_weight = 0.5 + 1 / 16  # e2m1 nibble + one e4m3 byte per 16
    nbytes = (
        int(used * (2 * inter * hidden + hidden * inter) * per_weight)
        + used * 2 * 4
        + batch * 6 * (hidden + 2 * inter) * 2 * 2
    )
    return (x, w13, w2, ids, topk, inter), nbytes


def moe_mxfp4_inputs(
    torch: ModuleType,
    batch: int,
    device: str,
    experts: int = 256,
    hidden: int = 4096,
    inter: int = 512,
) -> tuple[Args, int]:
    """Random MXFP4 weights made directly in the packed format (as moe_nvfp4_inputs): every byte
    value, ue8m0 scale bytes 118..121 (2^-9 .. 2^-6, so the layer's outputs stay O(1))."""
    x = torch.randn(batch, hidden, device=device).to(torch.bfloat16)

    def weights(n: int, k: int) -> Args:
        packed = torch.randint(0, 256, (experts, n, k // 2), dtype=torch.uint8, device=device)
        scale = torch.randint(118, 122, (experts, n, k // 32), dtype=torch.uint8, device=device)
        return packed, scale

    w13, w2 = weights(2 * inter, hidden), weights(hidden, inter)
    ids = torch.stack([torch.randperm(experts, device=device)[:6] for _ in range(batch)]).to(
        torch.int32
    )
    topk = torch.softmax(torch.randn(batch, 6, device=device), dim=1)
    used = torch.unique(ids).numel()
    per_weight = 0.5 + 1 / 32  # e2m1 nibble + one ue8m0 byte per 32; no global scale
    nbytes = (
        int(used * (2 * inter * hidden + hidden * inter) * per_weight)
        + batch * 6 * (hidden + 2 * inter) * 2 * 2
    )
    return (x, w13, w2, ids, topk, inter), nbytes


def run_moe_mxfp4(args: Args, up_cfg: Config, down_cfg: Config) -> Tensor:
    grouped_gemm_mxfp4 = kmod("moe_mxfp4").grouped_gemm_mxfp4
    swiglu = kmod("reference").swiglu

    x, w13, w2, ids, weights, _ = args
    up = grouped_gemm_mxfp4(x, *w13, ids, up_cfg)
    out: Tensor = grouped_gemm_mxfp4(
        swiglu(up).to(x.dtype), *w2, ids, down_cfg, topk_weights=weights, a_per_slot=True
    )
    return out


def check_mxfp4(
    torch: ModuleType, args: Args, up_cfg: Config, down_cfg: Config
) -> tuple[bool, float]:
    """The MXFP4 layer vs the torch reference over the dequantized weights, on CPU; only the
    experts the batch routes to are dequantized, as check_nvfp4."""
    moe_layer_mxfp4_ref = kmod("reference").moe_layer_mxfp4_ref

    x, w13, w2, ids, weights, _ = args
    out = run_moe_mxfp4(args, up_cfg, down_cfg).float().cpu().view(*ids.shape, -1).sum(dim=1)
    used, local = torch.unique(ids.cpu().long(), return_inverse=True)
    sub = [tuple(t[used.to(t.device)].cpu() for t in w) for w in (w13, w2)]
    ref = moe_layer_mxfp4_ref(x.cpu(), sub[0], sub[1], local.to(torch.int32), weights.cpu())
    err = ((out - ref).abs().max() / ref.abs().max()).item()
    return err < 2e-2, err


def run_moe_nvfp4(args: Args, up_cfg: Config, down_cfg: Config) -> Tensor:
    grouped_gemm_nvfp4 = kmod("moe_nvfp4").grouped_gemm_nvfp4
    swiglu = kmod("reference").swiglu

    x, w13, w2, ids, weights, _ = args
    up = grouped_gemm_nvfp4(x, *w13, ids, up_cfg)
    out: Tensor = grouped_gemm_nvfp4(
        swiglu(up).to(x.dtype), *w2, ids, down_cfg, topk_weights=weights, a_per_slot=True
    )
    return out


def check_nvfp4(
    torch: ModuleType, args: Args, up_cfg: Config, down_cfg: Config
) -> tuple[bool, float]:
    """The NVFP4 layer vs the torch reference over the dequantized weights, on CPU; only the
    experts the batch routes to are dequantized (the full 256 would be 12 GB of fp32)."""
    moe_layer_nvfp4_ref = kmod("reference").moe_layer_nvfp4_ref

    x, w13, w2, ids, weights, _ = args
    out = run_moe_nvfp4(args, up_cfg, down_cfg).float().cpu().view(*ids.shape, -1).sum(dim=1)
    used, local = torch.unique(ids.cpu().long(), return_inverse=True)
    sub = [tuple(t[used.to(t.device)].cpu() for t in w) for w in (w13, w2)]
    ref = moe_layer_nvfp4_ref(x.cpu(), sub[0], sub[1], local.to(torch.int32), weights.cpu())
    err = ((out - ref).abs().max() / ref.abs().max()).item()
    return err < 2e-2, err


def run_attn(args: Args, cfg: Config) -> Tensor:
    sparse_decode_attn = kmod("sparse_decode_attn").sparse_decode_attn

    q, swa, swa_idx, cmp, cmp_idx, sink = args
    out: Tensor = sparse_decode_attn(q, swa, swa_idx, cmp, cmp_idx, sink, cfg)
    return out


def run_moe(args: Args, up_cfg: Config, down_cfg: Config | None = None) -> Tensor:
    grouped_gemm = kmod("moe_grouped_gemm").grouped_gemm
    swiglu = kmod("reference").swiglu

    x, w13, w2, ids, weights, _ = args
    up = grouped_gemm(x, w13, ids, up_cfg)
    out: Tensor = grouped_gemm(
        swiglu(up).to(x.dtype), w2, ids, down_cfg or up_cfg, topk_weights=weights, a_per_slot=True
    )
    return out


def timed(fn: Callable[..., object], dry: bool) -> float:
    """Median seconds per call (CUDA events via do_bench); on a dry run, one wall-clock call."""
    if dry:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    from triton.testing import do_bench

    median_ms: float = do_bench(fn, warmup=25, rep=100, return_mode="median")
    return median_ms / 1e3


def check_correct(
    torch: ModuleType, attn_args: Args, moe_args: Args, attn_cfg: Config, moe_cfg: Config
) -> str:
    """Compare both kernels with the torch references (on CPU) for one bucket."""
    moe_layer_ref = kmod("reference").moe_layer_ref
    sparse_decode_attn_ref = kmod("reference").sparse_decode_attn_ref

    def cpu(x: Any) -> Any:  # a tensor, or a tuple of them (nested), or a plain value
        return (
            tuple(cpu(t) for t in x)
            if isinstance(x, tuple)
            else x.cpu()
            if hasattr(x, "cpu")
            else x
        )

    attn = run_attn(attn_args, attn_cfg).float().cpu()
    attn_err = (attn - sparse_decode_attn_ref(*cpu(attn_args))).abs().max().item()
    x, w13, w2, ids, weights, _ = moe_args
    moe = run_moe(moe_args, moe_cfg).float().cpu().view(*ids.shape, -1).sum(dim=1)
    ref = moe_layer_ref(*cpu((x, w13, w2, ids, weights)))
    moe_err = ((moe - ref).abs().max() / ref.abs().max()).item()
    ok = attn_err < 2e-2 and moe_err < 2e-2
    return f"{'PASS' if ok else 'FAIL'} (attention max abs err {attn_err:.2e}, MoE max rel err {moe_err:.2e})"


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    if not a.dry_run:
        try:
            import torch

            has_gpu = torch.cuda.is_available()
        except ImportError:
            has_gpu = False
        if not has_gpu:
            print(
                "no CUDA device: running the CPU dry run instead (no bandwidth figures)",
                file=sys.stderr,
            )
            a.dry_run = True
    if a.dry_run:
        from dsv4ops.kernels import interpreter

        interpreter.enable()
    import torch

    from dsv4ops.kernels.catalog import nearest, shipped_configs

    device = "cpu" if a.dry_run else "cuda"
    name = "dry-run (interpreter)" if a.dry_run else torch.cuda.get_device_name()
    peak = a.peak_gbps * 1e9 if a.peak_gbps else PEAK_BW.get(name)
    tables = {f.kernel: f.table for f in shipped_configs()}
    buckets = (
        [int(b) for b in a.buckets.split(",")] if a.buckets else sorted(tables["fused_moe_up"])
    )
    if a.dry_run:  # the interpreter runs every program in numpy: one small bucket, small MoE
        buckets = buckets[:1]
    rows: list[JSONObject] = []
    verdict: str | None = None
    tuned: dict[str, dict[str, Config]] = {
        "sparse_decode_attn": {},
        "fused_moe": {},
        "fused_moe_nvfp4": {},
        "fused_moe_mxfp4": {},
    }
    for m in buckets:
        attn_args, attn_bytes = attn_inputs(torch, m, device, pool=1024 if a.dry_run else 65536)
        moe_shape = {"experts": 8, "hidden": 256, "inter": 64} if a.dry_run else {}
        moe_args, moe_bytes = moe_inputs(torch, m, device, **moe_shape)
        fp4_args, fp4_bytes = moe_nvfp4_inputs(torch, m, device, **moe_shape)
        fp4_cfgs = (
            nearest(tables["fused_moe_nvfp4_up"], m),
            nearest(tables["fused_moe_nvfp4_down"], m),
        )
        mx_args, mx_bytes = moe_mxfp4_inputs(torch, m, device, **moe_shape)
        mx_cfgs = (
            nearest(tables["fused_moe_mxfp4_up"], m),
            nearest(tables["fused_moe_mxfp4_down"], m),
        )
        if verdict is None:  # correctness at the first bucket, before any timing
            verdict = check_correct(
                torch,
                attn_args,
                moe_args,
                nearest(tables["sparse_decode_attn"], m),
                nearest(tables["fused_moe_up"], m),
            )
            for label, check, args, cfgs in (
                ("NVFP4", check_nvfp4, fp4_args, fp4_cfgs),
                ("MXFP4", check_mxfp4, mx_args, mx_cfgs),
            ):
                ok, err = check(torch, args, *cfgs)
                if not ok and verdict.startswith("PASS"):
                    verdict = "FAIL" + verdict[4:]
                verdict += f" ({label} MoE max rel err {err:.2e}: {'PASS' if ok else 'FAIL'})"
            print(f"correctness vs torch reference (M={m}): {verdict}", file=sys.stderr)
        plans = [
            (
                "sparse_decode_attn",
                attn_bytes,
                lambda c, args=attn_args: run_attn(args, c),
                nearest(tables["sparse_decode_attn"], m),
                ATTN_CANDIDATES,
            ),
            (
                "fused_moe",
                moe_bytes,
                lambda c, args=moe_args: run_moe(args, c, c),
                nearest(tables["fused_moe_up"], m),
                MOE_CANDIDATES,
            ),
            # shipped: the up and down files' own configs; tuning: one candidate for both
            (
                "fused_moe_nvfp4",
                fp4_bytes,
                lambda c, args=fp4_args, own=fp4_cfgs: run_moe_nvfp4(
                    args, *(own if c is None else (c, c))
                ),
                None,
                MOE_CANDIDATES,
            ),
            (
                "fused_moe_mxfp4",
                mx_bytes,
                lambda c, args=mx_args, own=mx_cfgs: run_moe_mxfp4(
                    args, *(own if c is None else (c, c))
                ),
                None,
                MOE_CANDIDATES,
            ),
        ]
        for kernel, nbytes, fn, shipped, candidates in plans:
            seconds = timed(lambda fn=fn, cfg=shipped: fn(cfg), a.dry_run)
            shipped = (
                shipped or {"fused_moe_nvfp4": fp4_cfgs, "fused_moe_mxfp4": mx_cfgs}[kernel][0]
            )
            best = (seconds, shipped)
            if a.tune and not a.dry_run:
                for cfg in candidates:
                    try:
                        t = timed(lambda fn=fn, cfg=cfg: fn(cfg), False)
                    except Exception as exc:  # noqa: BLE001 - an invalid candidate is skipped, said why
                        print(f"  skip {kernel} {cfg}: {type(exc).__name__}", file=sys.stderr)
                        continue
                    best = min(best, (t, cfg), key=lambda x: x[0])
                tuned[kernel][str(m)] = best[1]
            row: JSONObject = {
                "kernel": kernel,
                "bucket": m,
                "bytes": nbytes,
                "us": round(seconds * 1e6, 1),
                "gbps": None if a.dry_run else round(nbytes / seconds / 1e9, 1),
                "pct_of_peak": None
                if a.dry_run or not peak
                else round(100 * nbytes / seconds / peak, 1),
                "tuned_us": round(best[0] * 1e6, 1) if a.tune else None,
            }
            row["target_pct"], row["meets_target"] = _target(kernel, m, row["pct_of_peak"])
            rows.append(row)
    if a.json:
        print(
            json.dumps(
                {"device": name, "peak_bytes_per_s": peak, "correctness": verdict, "rows": rows},
                indent=1,
            )
        )
    else:
        print(f"device: {name}   peak: {peak / 1e9 if peak else 'unknown'} GB/s")
        for r in rows:
            verdict_t = (
                ""
                if r["target_pct"] is None
                else (
                    f"  target {r['target_pct']:.0f}%: {'MET' if r['meets_target'] else 'MISSED'}"
                )
            )
            print(
                f"{r['kernel']:20s} M={r['bucket']:<4d} {r['bytes'] / 1e6:9.2f} MB {r['us']:10.1f} us "
                f"{r['gbps'] or '-':>8} GB/s {r['pct_of_peak'] or '-':>6} % of peak{verdict_t}"
            )
    if a.tune and a.out and not a.dry_run:
        out = a.out / name.replace(" ", "_")  # configs are per device: never mix them up
        out.mkdir(parents=True, exist_ok=True)
        for kernel, table in tuned.items():
            (out / f"{kernel}.tuned.json").write_text(json.dumps(table, indent=4) + "\n")
        tuned_on = {
            "tuned_on": name,
            "is_the_box": name == BOX_DEVICE,
            "note": "tuned on the box's GPU"
            if name == BOX_DEVICE
            else f"tuned on {name}, NOT the box's {BOX_DEVICE} (sm_120): do not ship these as its configs",
        }
        (out / "TUNED_ON.json").write_text(json.dumps(tuned_on, indent=1) + "\n")
        print(f"tuned configs written to {out}: {tuned_on['note']}")
    return 0 if verdict and verdict.startswith("PASS") else 1


def _target(kernel: str, m: int, pct: float | None) -> tuple[float | None, bool | None]:
    """(target % of peak, met?) where the issue sets one for this kernel at this M."""
    limit = TARGET_MAX_M.get(kernel)
    if kernel not in TARGET_PCT or (limit is not None and m > limit):
        return None, None
    return TARGET_PCT[kernel], None if pct is None else pct >= TARGET_PCT[kernel]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
