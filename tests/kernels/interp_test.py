"""Kernel correctness under Triton's CPU interpreter, one case per distinct shipped config.

Every decode bucket of every shipped profile maps to one of these configs (catalog_test), so this
covers each bucket's launch parameters. Shapes: attention runs the full per-rank DSV4-Flash decode
shape (16 heads, head dim 512, 128 SWA + 512 top-k FP8 rows, attention sink) for 2 requests with
padding; the MoE (bf16, NVFP4 and MXFP4 weights) runs E=8, hidden 256, intermediate 64 instead
of E=256, hidden 4096, intermediate 512 per rank (the interpreter runs each program in numpy).
The full shapes at every bucket's batch size run in benchmarks/kernels_gpu.py on a GPU. The FP4
tl.dot_scaled configs are AOT-only (catalog.AOT_ONLY): the interpreter computes NVFP4 dot_scaled
wrongly and 3.7.1's cannot run it at all.
"""

from __future__ import annotations

import pytest

from dsv4ops.kernels.aot import jobs_for
from dsv4ops.kernels.catalog import interpreter_jobs, shipped_configs
from dsv4ops.kernels.interp_check import run_case

pytestmark = pytest.mark.kernels
torch = pytest.importorskip("torch")

JOBS = interpreter_jobs(jobs_for(shipped_configs()))


@pytest.mark.parametrize(
    ("kernel", "config"), JOBS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(JOBS)]
)
def test_shipped_config_matches_the_torch_reference(kernel: str, config: dict[str, int]) -> None:
    result = run_case(kernel, config, seed=1)
    assert result["ok"], result


def test_moe_layer_up_swiglu_down_matches_reference() -> None:
    """The two GEMMs chained as the decode runs them: w13 -> clamped SwiGLU -> w2 x routed weight."""
    run_case("fused_moe_up", JOBS[0][1])  # enables the interpreter before kernels are imported
    from dsv4ops.kernels.sources.moe_grouped_gemm import grouped_gemm
    from dsv4ops.kernels.sources.reference import moe_layer_ref, swiglu

    g = torch.Generator().manual_seed(3)
    m, e, hidden, inter = 2, 8, 128, 32
    x = torch.randn(m, hidden, generator=g).to(torch.bfloat16)
    w13 = (torch.randn(e, 2 * inter, hidden, generator=g) / 8).to(torch.bfloat16)
    w2 = (torch.randn(e, hidden, inter, generator=g) / 8).to(torch.bfloat16)
    ids = torch.stack([torch.randperm(e, generator=g)[:6] for _ in range(m)]).to(torch.int32)
    weights = torch.softmax(torch.randn(m, 6, generator=g), dim=1)
    cfg = {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 2,
    }
    up = grouped_gemm(x, w13, ids, cfg)
    down = grouped_gemm(
        swiglu(up).to(torch.bfloat16), w2, ids, cfg, topk_weights=weights, a_per_slot=True
    )
    out = down.float().view(m, 6, hidden).sum(dim=1)
    ref = moe_layer_ref(x, w13, w2, ids, weights)
    assert (out - ref).abs().max() / ref.abs().max() < 2e-2


def test_attention_sink_and_padding_change_the_result_as_the_reference_says() -> None:
    """A large sink soaks up probability mass: the output shrinks toward zero, in both."""
    run_case("sparse_decode_attn", JOBS[-1][1])
    from dsv4ops.kernels.sources.reference import quantize_kv, sparse_decode_attn_ref
    from dsv4ops.kernels.sources.sparse_decode_attn import sparse_decode_attn

    g = torch.Generator().manual_seed(5)
    pool = quantize_kv(torch.randn(256, 512, generator=g))
    swa_idx = torch.randint(0, 256, (1, 128), generator=g, dtype=torch.int32)
    cmp_idx = torch.full((1, 512), -1, dtype=torch.int32)
    cmp_idx[0, :64] = torch.arange(64)
    q = (torch.randn(1, 16, 512, generator=g) * 0.3).to(torch.bfloat16)
    cfg = {"BLOCK_H": 16, "BLOCK_T": 16, "num_warps": 4, "num_stages": 2}
    small = sparse_decode_attn(
        q, pool, swa_idx, pool, cmp_idx, torch.full((16,), -30.0), cfg
    ).float()
    big = sparse_decode_attn(q, pool, swa_idx, pool, cmp_idx, torch.full((16,), 30.0), cfg).float()
    assert big.abs().max() < 1e-3 < small.abs().max()
    ref = sparse_decode_attn_ref(q, pool, swa_idx, pool, cmp_idx, torch.full((16,), -30.0))
    assert (small - ref).abs().max() < 2e-2


def test_moe_align_at_every_profile_bucket_with_the_full_expert_count() -> None:
    """Host-side routing plumbing at each real batch size (256 experts, top-6): every (token,
    slot) lands in exactly one block of its expert, padding is out of range."""
    from pathlib import Path

    from dsv4ops.kernels.catalog import nearest
    from dsv4ops.kernels.sources.moe_grouped_gemm import moe_align
    from dsv4ops.profiles import list_profiles, load_profile

    repo = Path(__file__).resolve().parents[2]
    buckets = sorted(
        {b for p in list_profiles(repo / "profiles") for b in load_profile(p).decode_buckets}
    )
    table = next(f.table for f in shipped_configs() if f.kernel == "fused_moe_up")
    g = torch.Generator().manual_seed(7)
    for m in buckets:
        block = nearest(table, m)["BLOCK_SIZE_M"]
        ids = torch.stack([torch.randperm(256, generator=g)[:6] for _ in range(m)])
        sorted_ids, expert_ids, n_post = moe_align(ids, block, 256)
        assert n_post.item() == sorted_ids.numel() == expert_ids.numel() * block
        real = sorted_ids[sorted_ids < m * 6].long()
        assert sorted(real.tolist()) == list(range(m * 6)), m
        owner = expert_ids.repeat_interleave(block)[sorted_ids < m * 6]
        assert torch.equal(owner.long(), ids.flatten()[real].long()), m
