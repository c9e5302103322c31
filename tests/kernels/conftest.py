from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsv4ops.kernels.build import BuildResult, build
from dsv4ops.kernels.interpreter import enable as enable_interpreter
from dsv4ops.remote.local import LocalExecutor
from testing.remote_sshd import sshd  # noqa: F401  (session fixture: a real OpenSSH server)

# TRITON_INTERPRET is read when @triton.jit decorates: turn it on before any test imports a kernel
# module (reference gotcha 2). Without the kernels extra there is nothing to turn on.
with contextlib.suppress(ImportError):
    enable_interpreter()


@dataclass(frozen=True)
class Built:
    v1: BuildResult  # built with the interpreter check
    v2: BuildResult  # same kernels, another version


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """Two real artifacts, built once per session (the interpreter run is the slow part)."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("dist")
    with LocalExecutor() as ex:
        v1 = build(executor=ex, out_dir=out, version="0.1.0")
        v2 = build(executor=ex, out_dir=out, version="0.2.0", interpreter=False)
    yield Built(v1, v2)


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d
