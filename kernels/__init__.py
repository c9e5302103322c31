"""Triton kernels for DSV4-Flash decode, their plain-torch references and tuned configs.

Kernel modules import only triton at top level (the sm_120 AOT check runs without torch).
`configs/` holds the tuned launch parameters per decode batch bucket; see docs/kernels.md.
"""
