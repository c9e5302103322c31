"""mypy with the project's config ([tool.mypy] in pyproject.toml: strict) passes on its `files`,
and on the test doubles of the orchestrator's target seam (they must satisfy `TargetControl`).

This is how the type check runs in CI (CI runs `make test`); `make lint` runs the same command.
The cache lives in the system temp directory, one per Python and mypy version and shared by every
checkout on the machine: mypy names modules relative to the checkout and revalidates each cached
file by its hash when the mtime differs, so another checkout's cache is reused exactly where the
files are the same. A warm run takes ~4 s, a cold one ~30 s alone and ~100 s beside three other
test workers on two cores, the most of any test in `make test` (torch is skipped: pyproject.toml).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (it is in the dev extra: pip install -e '.[dev]')",
)


def _mypy(*files: str) -> subprocess.CompletedProcess[str]:
    from mypy.version import __version__ as mypy_version

    key = f"py{sys.version_info[0]}{sys.version_info[1]}-mypy{mypy_version}"
    cache = Path(tempfile.gettempdir()) / f"dsv4ops-mypy-cache-{key}"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            "--no-color-output",
            "--no-error-summary",
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@needs_mypy
def test_mypy_passes_with_the_project_config() -> None:
    proc = _mypy()
    assert proc.returncode == 0, f"mypy found type errors:\n{proc.stdout}{proc.stderr}"


# A test double of the orchestrator's target seam says so with a function returning it as a
# `TargetControl`; mypy then checks that it satisfies the protocol the real Supervisor does.
DOUBLE_MARK = "-> TargetControl:"


@needs_mypy
def test_the_target_control_doubles_satisfy_the_protocol() -> None:
    doubles = sorted(
        str(p.relative_to(ROOT))
        for top in ("tests", "testing")
        for p in (ROOT / top).rglob("*.py")
        if DOUBLE_MARK in p.read_text(encoding="utf-8") and p.name != "mypy_test.py"
    )
    assert doubles, "no test double of TargetControl found (testing/orchestrate.py?)"
    proc = _mypy(*doubles)
    assert proc.returncode == 0, f"a test double breaks TargetControl:\n{proc.stdout}{proc.stderr}"


# pyproject.toml lets the Triton device code (dsv4ops/kernels/sources/) keep its parameters
# unannotated: Triton reads those annotations. The exception is for @triton.jit functions only.
SOURCES = ROOT / "dsv4ops" / "kernels" / "sources"


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) in ("triton.jit", "jit") for d in fn.decorator_list)


def _unannotated(tree: ast.Module) -> list[str]:
    """The functions of a module, other than @triton.jit ones, with a parameter or the return
    unannotated (self/cls excepted)."""
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or _is_jit(node):
            continue
        args = node.args
        params = [
            *args.posonlyargs,
            *args.args,
            *args.kwonlyargs,
            *(a for a in (args.vararg, args.kwarg) if a is not None),
        ]
        missing = [a.arg for a in params if a.annotation is None and a.arg not in ("self", "cls")]
        if node.returns is None or missing:
            bad.append(f"{node.name}:{node.lineno} ({', '.join(missing) or 'return'})")
    return bad


def test_only_the_triton_jit_functions_are_unannotated() -> None:
    bad = {
        p.name: b
        for p in sorted(SOURCES.glob("*.py"))
        if (b := _unannotated(ast.parse(p.read_text(encoding="utf-8"))))
    }
    assert bad == {}, f"host functions in kernels/sources need full annotations: {bad}"


def test_the_annotation_rule_catches_an_untyped_host_function() -> None:
    tree = ast.parse(
        "@triton.jit\ndef k(x, N: tl.constexpr):\n    pass\n\n"
        "def host(a: int, b) -> int:\n    return a\n\ndef h2(a: int):\n    pass\n"
    )
    assert _unannotated(tree) == ["host:5 (b)", "h2:8 (return)"]
