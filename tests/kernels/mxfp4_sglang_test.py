"""Our MXFP4-expert MoE kernel (kernels/moe_mxfp4.py) against SGLang 0.5.23's own plain-torch code.

Issue 41 asked for the MoE what the attention has (flash_mla_paged_test.py): a check against a
reference SGLang itself ships, usable on a CPU. The pinned wheel has two, both torch only:
`MXFP4QuantizeUtil.dequantize` (srt/layers/quantization/mxfp4_tensor.py L77: low nibble = even
index, value = e2m1 * 2^(ue8m0 - 127) per 32 along K) and `torch_naive_fused_moe`
(test/cpu_test_utils.py L212: softmax routing, top-k, SiluAndMul, routed-weight sum), the
reference SGLang's CPU MoE kernel tests use. What runs on the box for DSV4-Flash's experts is
FlashInfer's CUTLASS kernel on weights reshuffled at load (mxfp4_flashinfer_cutlass_moe.py L238),
which has no CPU path: this proves the format and the layer's arithmetic, not that path.

Our kernel runs in Triton's CPU interpreter. Weights here are small (|w| < 1, inputs ~N(0,1)),
so DSV4's SwiGLU clamp at 10 never bites and SGLang's unclamped SiluAndMul is the same function.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from tools.sglang_wheel import MISSING, WHEEL

pytestmark = [pytest.mark.kernels, pytest.mark.skipif(not WHEEL.is_file(), reason=MISSING)]
torch = pytest.importorskip("torch")

from dsv4ops.kernels.interpreter import enable  # noqa: E402

enable()  # before any kernel module is imported (conftest does it too)

from dsv4ops.kernels.sources.moe_mxfp4 import grouped_gemm_mxfp4  # noqa: E402
from dsv4ops.kernels.sources.reference import (  # noqa: E402
    dequantize_mxfp4,
    quantize_mxfp4,
    swiglu,
)
from testing.kernels import sglang_mxfp4  # noqa: E402

if TYPE_CHECKING:
    from torch import Tensor

CONFIG = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 32,
    "BLOCK_SIZE_K": 64,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 3,
}


@pytest.fixture(scope="module")
def sglang(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, ModuleType]:
    return sglang_mxfp4(tmp_path_factory.mktemp("sglang-wheel"))


def _sglang_dequant(util: ModuleType, packed: Tensor, scale: Tensor) -> Tensor:
    return util.MXFP4QuantizeUtil.dequantize(packed, torch.float32, scale, [32])


def test_our_format_is_sglangs_bit_for_bit(sglang: tuple[ModuleType, ModuleType]) -> None:
    """Every packed byte (all 16 x 16 nibble pairs) under every finite scale byte 0..254 decodes
    to the same fp32 value on both sides (255 is NaN in OCP MX; neither quantizer writes it)."""
    util, _ = sglang
    packed = torch.arange(256, dtype=torch.int64).repeat(255).to(torch.uint8).reshape(255 * 16, 16)
    scale = torch.arange(255, dtype=torch.int64).repeat_interleave(16).to(torch.uint8)
    scale = scale.reshape(255 * 16, 1)
    ours, theirs = dequantize_mxfp4(packed, scale), _sglang_dequant(util, packed, scale)
    assert ours.shape == theirs.shape == (255 * 16, 32)
    assert torch.equal(ours, theirs)


def test_the_layer_matches_sglangs_naive_moe(sglang: tuple[ModuleType, ModuleType]) -> None:
    """w13 -> SwiGLU -> w2 x routed weight through our kernel (twice, interpreted) against
    `torch_naive_fused_moe` over SGLang's own dequantization of the same bytes, with SGLang's
    routing (softmax over the scores, top-k, no renormalisation) handed to our kernel."""
    util, naive = sglang
    g = torch.Generator().manual_seed(41)
    e, hidden, inter, m, top_k = 8, 64, 32, 5, 2
    q13 = quantize_mxfp4(torch.randn(e, 2 * inter, hidden, generator=g) / 8)
    q2 = quantize_mxfp4(torch.randn(e, hidden, inter, generator=g) / 8)
    x = torch.randn(m, hidden, generator=g).to(torch.bfloat16)
    score = torch.randn(m, e, generator=g)
    weights, ids = torch.topk(torch.softmax(score, dim=-1, dtype=torch.float32), top_k)

    up = grouped_gemm_mxfp4(x, *q13, ids.to(torch.int32), CONFIG)
    assert swiglu(up).abs().max().item() < 10  # the clamp does not bite: SiluAndMul is the same
    down = grouped_gemm_mxfp4(
        swiglu(up).to(torch.bfloat16),
        *q2,
        ids.to(torch.int32),
        CONFIG,
        topk_weights=weights,
        a_per_slot=True,
    )
    ours = down.float().view(m, top_k, hidden).sum(dim=1)
    w1, w2 = _sglang_dequant(util, *q13), _sglang_dequant(util, *q2)
    theirs = naive.torch_naive_fused_moe(x.float(), w1, w2, score, top_k, renormalize=False)
    # ours rounds the activations between the GEMMs to bf16 (as SGLang's Triton MoE does): a
    # and its output to bf16 (seen: 1.0 % of the norm); a format or routing mistake is O(1)
    # (the kernel's nibble order swapped: 136 % of the max; every scale byte read one too high
    # doubles the activations and fails the clamp check above)
    assert ((ours - theirs).abs().max() / theirs.abs().max()).item() < 4e-2
    assert (ours - theirs).norm().item() / theirs.norm().item() < 2e-2
