"""Triton kernels for DSV4-Flash decode, their plain-torch references and tuned configs.

Kernel modules import only triton at top level (the sm_120 AOT check runs without torch).
`configs/` (bf16 MoE, SGLang's names), `attention_configs/` and `moe_fp4_configs/` (NVFP4 and
MXFP4 MoE) hold the launch parameters per decode batch bucket; see docs/kernels.md.
"""
