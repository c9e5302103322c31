from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from dsv4ops.kernels.interpreter import enable as enable_interpreter

# TRITON_INTERPRET is read when @triton.jit decorates: turn it on before any test imports a kernel
# module (reference gotcha 2). Without the kernels extra there is nothing to turn on.
with contextlib.suppress(ImportError):
    enable_interpreter()


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d
