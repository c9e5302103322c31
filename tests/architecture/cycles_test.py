"""No import cycle between the package's modules, lazy imports inside functions included.

The layer test (imports_test.py) sees areas; this one sees modules. A cycle hidden in a
function-local import still means neither module can be read, tested or moved without the
other, so it counts like a top-level one. `from pkg import sub` is an edge to the submodule
`pkg.sub` (not to `pkg/__init__.py`, which Python imports on the way to any submodule).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

from testing.package_ast import Module, modules, package_of


def _targets(mod: Module, known: Mapping[str, Module]) -> Iterator[str]:
    """The package modules `mod` imports, anywhere in its source."""
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_of(mod).split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            yield from subs
            if len(subs) < len(node.names) and target in known:
                yield target


def import_graph() -> dict[str, set[str]]:
    known = {m.name: m for m in modules()}
    return {m.name: set(_targets(m, known)) - {m.name} for m in modules()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_function_local_imports() -> None:
    # cli/runbook.py imports the runbook runner only inside its command function
    assert "dsv4ops.runbooks.run" in import_graph()["dsv4ops.cli.runbook"]


def test_no_import_cycle_between_modules() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (function-local imports count):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )
