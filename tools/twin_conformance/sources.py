"""Read an SGLang package statically: from the wheel (a zip) or an unpacked copy, never importing it.

Paths are relative to the `sglang/` package (`srt/entrypoints/http_server.py`), as in the
reference notes. Every file read is remembered with its sha256, so the fixture can name exactly
which bytes each fact came from.
"""

from __future__ import annotations

import ast
import hashlib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "sglang"


class SourceError(Exception):
    """The argument is not an SGLang wheel or source tree, or an anchor the tool needs is missing."""


@dataclass
class SourceTree:
    """An `sglang/` package, in a wheel or a directory; `read` records what it served."""

    origin: Path
    wheel_sha256: str | None
    _files: dict[str, bytes | Path]
    read_sha256: dict[str, str] = field(default_factory=dict)
    _trees: dict[str, ast.Module] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> SourceTree:
        if path.is_file():
            return cls._from_wheel(path)
        if path.is_dir():
            return cls._from_dir(path)
        raise SourceError(f"{path}: no such wheel or directory")

    @classmethod
    def _from_wheel(cls, path: Path) -> SourceTree:
        data = path.read_bytes()
        try:
            with zipfile.ZipFile(path) as zf:
                files: dict[str, bytes | Path] = {
                    n[len(PACKAGE) + 1 :]: zf.read(n)
                    for n in zf.namelist()
                    if n.startswith(PACKAGE + "/") and n.endswith(".py")
                }
        except zipfile.BadZipFile:
            raise SourceError(f"{path}: not a wheel (zip) file") from None
        if not files:
            raise SourceError(f"{path}: the wheel has no {PACKAGE}/ package")
        return cls(path, hashlib.sha256(data).hexdigest(), files)

    @classmethod
    def _from_dir(cls, path: Path) -> SourceTree:
        root = path if (path / "srt").is_dir() else path / PACKAGE
        if not (root / "srt").is_dir():
            raise SourceError(f"{path}: neither an {PACKAGE}/ package nor a folder holding one")
        files: dict[str, bytes | Path] = {
            p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*.py"))
        }
        return cls(path, None, files)

    def exists(self, rel: str) -> bool:
        return rel in self._files

    def names(self, prefix: str) -> list[str]:
        return sorted(n for n in self._files if n.startswith(prefix))

    def text(self, rel: str) -> str:
        raw = self._files.get(rel)
        if raw is None:
            raise SourceError(f"{PACKAGE}/{rel} is missing from {self.origin}")
        data = raw.read_bytes() if isinstance(raw, Path) else raw
        self.read_sha256[rel] = hashlib.sha256(data).hexdigest()
        return data.decode("utf-8")

    def tree(self, rel: str) -> ast.Module:
        if rel not in self._trees:
            self._trees[rel] = ast.parse(self.text(rel), filename=f"{PACKAGE}/{rel}")
        return self._trees[rel]

    def version(self) -> str:
        """`__version__` from `_version.py` (the wheel's generated version file)."""
        for node in ast.walk(self.tree("_version.py")):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
            ):
                return str(node.value.value)
        raise SourceError(f"{PACKAGE}/_version.py sets no __version__")


def loc(rel: str, node: ast.AST) -> str:
    return f"{rel}:{getattr(node, 'lineno', 0)}"


def find_class(tree: ast.Module, name: str, rel: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise SourceError(f"class {name} not found in {PACKAGE}/{rel}")


def find_function(
    scope: ast.Module | ast.ClassDef, name: str, rel: str
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in scope.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    raise SourceError(f"function {name} not found in {PACKAGE}/{rel}")


def call_name(call: ast.Call) -> str | None:
    """`Gauge(...)` → Gauge, `app.get(...)` → get, `ray_metrics.Counter(...)` → Counter."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def const_strs(node: ast.AST | None) -> list[str] | None:
    """A list/tuple/set of string constants, else None."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        out = [const_str(e) for e in node.elts]
        if all(v is not None for v in out):
            return [v for v in out if v is not None]
    return None


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """child → parent for every node of `tree`."""
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def enclosing_ifs(node: ast.AST, up: dict[ast.AST, ast.AST]) -> list[str]:
    """The conditions (outermost first) under which `node` runs, up to its function or module."""
    conds: list[str] = []
    child = node
    cur = up.get(node)
    while cur is not None and not isinstance(
        cur, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    ):
        if isinstance(cur, ast.If):
            text = ast.unparse(cur.test)
            conds.append(text if child in cur.body else f"not ({text})")
        child, cur = cur, up.get(cur)
    return conds[::-1]
