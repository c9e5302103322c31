"""Triton's CPU interpreter, made usable for the kernels' correctness checks.

TRITON_INTERPRET is read when `@triton.jit` decorates, so `enable()` must run before any kernel
module is imported (reference gotcha 2). It also fixes one interpreter bug seen with triton 3.7.1
and 3.8.0 on numpy 2.x: `tl.dot` on bf16 operands multiplies their raw uint16 storage (the
interpreter keeps bf16 as uint16), giving garbage. The fix converts bf16 operands to fp32 before
the matmul, which is what the hardware MMA does (bf16 inputs, fp32 accumulate); the kernel code
that is compiled for sm_120 stays unchanged.
"""

from __future__ import annotations

import os

_patched = False


def enable() -> None:
    """Turn on TRITON_INTERPRET and patch bf16 tl.dot. Call before importing kernel modules."""
    global _patched
    os.environ["TRITON_INTERPRET"] = "1"
    if _patched:
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    original = interp.InterpreterBuilder.create_dot

    def _as_fp32(handle: interp.TensorHandle) -> interp.TensorHandle:
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        data = interp._convert_float(handle.data, tl.bfloat16, tl.float32, None).view(np.float32)
        return interp.TensorHandle(data.reshape(handle.data.shape), tl.float32)

    # triton is untyped here (no py.typed): its builder and handles are what the interpreter
    # passes, so they are typed as the interpreter's own classes where it names them.
    def create_dot(
        self: interp.InterpreterBuilder,
        a: interp.TensorHandle,
        b: interp.TensorHandle,
        d: interp.TensorHandle,
        input_precision: object,
        max_num_imprecise_acc: object,
    ) -> interp.TensorHandle:
        return original(self, _as_fp32(a), _as_fp32(b), d, input_precision, max_num_imprecise_acc)

    interp.InterpreterBuilder.create_dot = create_dot
    _patched = True
