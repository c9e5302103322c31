"""The package's modules read as source (no import): names, parsed trees and what each imports.

Shared by the architecture tests (layers, one home per side effect, sizes); parsing is cached
because every test walks the same ~170 files.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "dsv4ops"


@dataclass(frozen=True)
class Module:
    name: str  # dotted: dsv4ops.canary.loadgen (a package is its __init__: dsv4ops.canary)
    path: Path  # relative to the repository root: dsv4ops/canary/loadgen.py
    tree: ast.Module
    lines: int


@dataclass(frozen=True)
class Import:
    module: str  # the imported module, absolute ("dsv4ops.clock", "urllib.request")
    lineno: int


@functools.cache
def modules() -> tuple[Module, ...]:
    out = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR.parent)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(rel))
        out.append(Module(".".join(parts), rel, tree, len(text.splitlines())))
    return tuple(out)


def package_of(mod: Module) -> str:
    return mod.name if mod.path.name == "__init__.py" else mod.name.rpartition(".")[0]


def from_target(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute module of `from X import ...` in `mod` (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = package_of(mod).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mod: Module) -> Iterator[Import]:
    """Every import in the module, lazy ones inside functions included; `from a import b`
    yields both `a` and `a.b` (b may be a submodule: `from urllib import request`)."""
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = from_target(mod, node)
            yield Import(target, node.lineno)
            for alias in node.names:
                yield Import(f"{target}.{alias.name}", node.lineno)


def functions(mod: Module) -> Iterator[tuple[str, int]]:
    """(qualified name, length in lines) of every def in the module, nested ones included."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield name, (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(mod.tree, "")
