"""`Any` only where a value is truly untyped JSON, and then by its name (issue 24): the package
spells that `dsv4ops.jsontypes.JSONValue` / `JSONObject`, and a bare `Any` anywhere else is a
type left to write.

The count is of `Any` as code: annotations (quoted ones too), `cast(Any, ...)`, aliases, never
the import line, a comment or a docstring. The allow-list holds each module's count when the
gate came in and only shrinks, like the C901 list in complexity_test.py: a module over its
number fails, and one under it fails until its number is lowered (or it is struck off), so the
list always says what is left to type.
"""

from __future__ import annotations

import ast

from testing.package_ast import Module, modules

ALIAS_HOME = "dsv4ops/jsontypes.py"  # where `Any` is named: JSONValue, JSONObject

# Path -> its bare `Any` when the gate came in (issue 24). Lower it as `Any` goes; strike the
# module off at 0. Never add to it: give the value its type, or JSONValue if it is JSON.
ALLOWED: dict[str, int] = {
    "dsv4ops/kernels/aot_worker.py": 1,
    "dsv4ops/kernels/sglang_plugin.py": 1,
}


def _in_string(node: ast.expr) -> int:
    """`Any` inside a quoted annotation ("dict[str, Any]")."""
    found = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                found += count_any(ast.parse(sub.value, mode="eval"))
            except SyntaxError:
                continue
    return found


def _annotations(tree: ast.AST) -> list[ast.expr]:
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            out.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            out.append(node.returns)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name == "cast":
                out.append(node.args[0])
    return out


def count_any(tree: ast.AST) -> int:
    """How many times the code in `tree` names `Any` (`Any`, `typing.Any`, quoted or not)."""
    plain = sum(
        1
        for node in ast.walk(tree)
        if (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
    )
    return plain + sum(_in_string(a) for a in _annotations(tree))


def _renamed_any(mod: Module) -> list[str]:
    return [
        f"{mod.path}:{node.lineno} imports Any as {alias.asname}"
        for node in ast.walk(mod.tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name == "Any" and alias.asname not in (None, "Any")
    ]


def found() -> dict[str, int]:
    counts = {str(m.path): count_any(m.tree) for m in modules() if str(m.path) != ALIAS_HOME}
    return {path: n for path, n in counts.items() if n}


def test_the_count_sees_every_spelling_of_any() -> None:
    source = (
        "from typing import Any, cast\n"
        "import typing\n"
        "x: Any = 1  # Any in a comment is not counted\n"
        "def f(a: 'dict[str, Any]', b: typing.Any) -> list[Any]:\n"
        '    """Any in a docstring is not counted."""\n'
        "    return cast('Any', a)\n"
        "Alias = dict[str, Any]\n"
    )
    assert count_any(ast.parse(source)) == 6
    home = next(m for m in modules() if str(m.path) == ALIAS_HOME)
    assert count_any(home.tree) == 1  # JSONValue: TypeAlias = Any, read from the package


def test_no_new_any() -> None:
    counts = found()
    new = sorted(f"{p}: {n} (none allowed)" for p, n in counts.items() if p not in ALLOWED)
    grew = sorted(
        f"{p}: {n}, allow-listed at {ALLOWED[p]}"
        for p, n in counts.items()
        if p in ALLOWED and n > ALLOWED[p]
    )
    why = "give these values their type (JSON: dsv4ops.jsontypes.JSONValue / JSONObject):\n"
    assert not new and not grew, why + "\n".join(new + grew)


def test_the_allow_list_is_exact() -> None:
    counts = found()
    stale = sorted(
        f"{p}: now {counts.get(p, 0)}, listed at {n}"
        for p, n in ALLOWED.items()
        if counts.get(p, 0) != n
    )
    assert not stale, "lower or strike off these entries (the list only shrinks):\n" + "\n".join(
        stale
    )


def test_any_is_never_imported_under_another_name() -> None:
    bad = [line for mod in modules() for line in _renamed_any(mod)]
    assert not bad, "a renamed Any would hide from the count:\n" + "\n".join(bad)
