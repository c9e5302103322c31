"""No import cycle between the package's modules, lazy imports inside functions included.

The layer test (imports_test.py) sees areas; this one sees modules. A cycle hidden in a
function-local import still means neither module can be read, tested or moved without the
other, so it counts like a top-level one. `from pkg import sub` is an edge to the submodule
`pkg.sub` (not to `pkg/__init__.py`, which Python imports on the way to any submodule).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping

from testing.package_ast import Module, from_target, modules


def _targets(mod: Module, known: Mapping[str, Module]) -> Iterator[str]:
    """The package modules `mod` imports, anywhere in its source."""
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            target = from_target(mod, node)
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            yield from subs
            if len(subs) < len(node.names) and target in known:
                yield target


@functools.cache
def import_graph() -> dict[str, set[str]]:
    known = {m.name: m for m in modules()}
    return {m.name: set(_targets(m, known)) - {m.name} for m in modules()}


def _reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    """The modules reachable from `start` over one import or more."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or through others: each module
    with the modules it reaches and is reached from (~180 modules: a search from each is cheap)."""
    reach = {node: _reachable(graph, node) for node in graph}
    groups = {
        tuple(sorted(m for m in reach[node] if node in reach.get(m, ())))
        for node in graph
        if node in reach[node]
    }
    return sorted(list(g) for g in groups)


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_function_local_imports() -> None:
    # cli/runbook.py imports its use case only inside its command functions
    assert "dsv4ops.usecases.runbook" in import_graph()["dsv4ops.cli.runbook"]


def test_no_import_cycle_between_modules() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (function-local imports count):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )
