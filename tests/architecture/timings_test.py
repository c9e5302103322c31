"""Each lifecycle timing default has one home, dsv4ops/timings.py (issue 42): a number given as a
stop grace, a readiness or drain bound or a request timeout anywhere else in the package that
equals one of its constants is a second declaration of it, and fails here with its file:line.

A timing place is a parameter default, a keyword argument, an assignment or a `.get(key,
default)` whose name says grace, timeout, ready or drain. Equal numbers that mean something
else are listed in ELSEWHERE with their reason (as the layer table's exceptions are).
"""

from __future__ import annotations

import ast
import re

from dsv4ops import timings
from testing.package_ast import Module, modules

HOME = "dsv4ops/timings.py"
# A stop grace, a readiness or drain bound, or the one-request timeout of the target's HTTP calls
# and waits (`timeout_s` itself: connect, compile or subprocess timeouts mean other things).
TIMING_NAME = re.compile(r"grace|ready|drain|^timeout_s$", re.IGNORECASE)
# The twin is its own program (SGLang's stand-in): its numbers are SGLang's, not ours.
NOT_POLICED = ("dsv4ops/twin/",)
# (path, line text fragment) -> why the equal number is not the constant it equals.
ELSEWHERE: dict[tuple[str, str], str] = {
    ("dsv4ops/canary/suites/abort_cascade.py", "ABORT_GRACE_S = "): "how long an aborted stream "
    "may take to end, a canary verdict's bound, not a process's stop",
    ("dsv4ops/canary/suites/abort_cascade.py", "timeout_s=min(th.first_token_deadline_s"): "the "
    "suite's wait for its streams to decode, capped by its own first-token deadline",
    ("dsv4ops/runbooks/execute.py", "INTERRUPT_GRACE_S = "): "how long a runbook's child "
    "command may finish after Ctrl-C on this machine",
    ("dsv4ops/runbooks/model.py", "timeout_s: float = "): "a runbook step's own default "
    "bound, written in the runbook's prose",
}


def _constants() -> dict[float, list[str]]:
    """Each number timings.py declares (a mapping's values too) -> the names declaring it."""
    out: dict[float, list[str]] = {}
    for name, value in vars(timings).items():
        if not name.isupper():
            continue
        values = value.values() if hasattr(value, "values") else [value]
        for v in values:
            if isinstance(v, int | float) and not isinstance(v, bool):
                out.setdefault(float(v), []).append(name)
    return out


def _number(node: ast.expr | None) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    return None


def _named(name: str | None, value: ast.expr | None) -> list[tuple[float, int]]:
    """The numbers `value` gives a timing name: itself, or the bounds of a min()/max() of it."""
    if name is None or value is None or not TIMING_NAME.search(name):
        return []
    if isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("min", "max"):
        return [hit for arg in value.args for hit in _named(name, arg)]
    number = _number(value)
    return [] if number is None else [(number, value.lineno)]


def _in_arguments(node: ast.arguments) -> list[tuple[float, int]]:
    positional = node.posonlyargs + node.args
    pairs = list(
        zip(positional[len(positional) - len(node.defaults) :], node.defaults, strict=False)
    )
    pairs += [
        (a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=False) if d is not None
    ]
    return [hit for arg, default in pairs for hit in _named(arg.arg, default)]


def _in_call(node: ast.Call) -> list[tuple[float, int]]:
    found = [hit for kw in node.keywords for hit in _named(kw.arg, kw.value)]
    func, args = node.func, node.args
    getter = isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and len(args) > 1
    if getter and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        found += _named(args[0].value, args[1])
    return found


def _in_assign(node: ast.Assign | ast.AnnAssign) -> list[tuple[float, int]]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", None) for t in targets]
    return [hit for name in names for hit in _named(name, node.value)]


def _in_dict(node: ast.Dict) -> list[tuple[float, int]]:
    return [
        hit
        for k, v in zip(node.keys, node.values, strict=False)
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
        for hit in _named(k.value, v)
    ]


def _timing_numbers(tree: ast.AST) -> list[tuple[float, int]]:
    """(number, line) of each number given in a timing place of `tree`."""
    found: list[tuple[float, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            found += _in_arguments(node)
        elif isinstance(node, ast.Call):
            found += _in_call(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            found += _in_assign(node)
        elif isinstance(node, ast.Dict):
            found += _in_dict(node)
    return found


def _duplicates(mod: Module, constants: dict[float, list[str]]) -> list[str]:
    if str(mod.path) == HOME or str(mod.path).startswith(NOT_POLICED):
        return []
    lines = mod.path.read_text(encoding="utf-8").splitlines() if mod.path.exists() else []
    bad = []
    for number, line in _timing_numbers(mod.tree):
        if number not in constants:
            continue
        text = lines[line - 1] if line <= len(lines) else ""
        if any(p == str(mod.path) and frag in text for p, frag in ELSEWHERE):
            continue
        names = " or ".join(constants[number])
        bad.append(f"{mod.path}:{line}: {number:g} repeats timings.{names}: {text.strip()}")
    return bad


def test_no_timing_number_repeats_a_timings_constant_outside_its_home() -> None:
    constants = _constants()
    bad = [line for mod in modules() for line in _duplicates(mod, constants)]
    assert not bad, "import it from dsv4ops/timings.py (or list why it differs):\n" + "\n".join(bad)


def test_the_check_sees_the_places_it_polices() -> None:
    """Each kind of timing place is found (a check that sees nothing passes everything)."""
    source = """
def stop(name, grace_s=30.0): ...
def wait(*, timeout_s: float = 10.0, connect_timeout_s: float = 10.0): ...
sup.stop("decode", grace_s=30)
DRAIN_BOUND_S = 60.0
grace = req.get("grace_s", 10.0)
args = {"ready_timeout_s": 1200}
Timeouts(drain_s=min(60.0, s))
"""
    found = _timing_numbers(ast.parse(source))
    assert sorted(n for n, _ in found) == [10.0, 10.0, 30.0, 30.0, 60.0, 60.0, 1200.0]
    constants = _constants()
    assert all(n in constants for n, _ in found)
