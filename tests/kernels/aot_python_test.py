"""Which interpreter runs the sm_120 compile: declared ($DSV4OPS_AOT_PYTHON, or the record
`make install` writes in the venv), never guessed from the checkout's layout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsv4ops.errors import KernelPackageError
from dsv4ops.kernels import aot
from dsv4ops.remote.local import LocalExecutor


def test_the_environment_variable_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSV4OPS_AOT_PYTHON", str(tmp_path / "py"))
    assert aot.aot_python() == tmp_path / "py"


def test_else_the_venv_record_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DSV4OPS_AOT_PYTHON", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    (tmp_path / "dsv4ops-aot-python").write_text("/somewhere/.venv-aot/bin/python\n")
    assert aot.aot_python() == Path("/somewhere/.venv-aot/bin/python")


def test_without_either_the_check_says_how_to_name_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DSV4OPS_AOT_PYTHON", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # a venv without the record
    with pytest.raises(KernelPackageError) as exc:
        aot.check([], executor=LocalExecutor(), kernels_root=tmp_path)
    assert "the sm_120 compile venv is missing" in str(exc.value)
    assert "DSV4OPS_AOT_PYTHON" in (exc.value.hint or "")
