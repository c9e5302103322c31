"""Which JSON keys a serialised pydantic model or msgspec Struct carries, read from its class.

pydantic `model_dump_json()` writes every field, minus what a `@model_serializer` pops
(`if self.x is None: data.pop("x", None)`, also one level down: `data["delta"].pop(...)`).
A msgspec Struct with `omit_defaults=True` writes required fields, and defaulted ones only when
the value differs from the default (all the defaults that matter here are None).
Presence of a value: "set", "none" (absent or a None constant), "maybe" (could be None).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .sources import SourceTree, call_name, const_str, find_class, loc


@dataclass
class Model:
    name: str
    source: str
    msgspec: bool
    omit_defaults: bool
    fields: dict[str, bool]  # field → has a default
    pops: list[tuple[str | None, str, list[str]]] = field(default_factory=list)
    # (sub-field or None, popped key, the `self.` path that must be None)


def read_model(src: SourceTree, rel: str, name: str) -> Model:
    cls = find_class(src.tree(rel), name, rel)
    bases = {ast.unparse(b) for b in cls.bases}
    is_msgspec = "msgspec.Struct" in bases
    omit = any(
        k.arg == "omit_defaults" and isinstance(k.value, ast.Constant) and k.value.value
        for k in cls.keywords
    )
    fields = {
        n.target.id: n.value is not None
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    model = Model(name, loc(rel, cls), is_msgspec, omit, fields)
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.ops[0], ast.Is)
            and ast.unparse(node.test.comparators[0]) == "None"
        ):
            cond = ast.unparse(node.test.left).removeprefix("self.").split(".")
            for call in (c for s in node.body for c in ast.walk(s) if isinstance(c, ast.Call)):
                if call_name(call) == "pop" and isinstance(call.func, ast.Attribute):
                    owner = call.func.value
                    sub = const_str(owner.slice) if isinstance(owner, ast.Subscript) else None
                    model.pops.append((sub, const_str(call.args[0]) or "", cond))
    return model


def presence(expr: ast.expr | None, func: ast.AST | None) -> str:
    """How sure it is that `expr` is not None at a call site inside `func`."""
    if expr is None or (isinstance(expr, ast.Constant) and expr.value is None):
        return "none"
    if isinstance(expr, ast.IfExp):
        sides = {presence(expr.body, func), presence(expr.orelse, func)}
        return "set" if sides == {"set"} else "maybe"
    if isinstance(expr, ast.Name) and func is not None:
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value is None
                and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
            ):
                return "maybe"
    return "set"


def _state(model: Model, given: dict[str, str], cond: list[str]) -> str:
    """Whether the field a pop condition tests is set; deeper paths are not followed."""
    if len(cond) != 1:
        return "maybe"
    return given.get(cond[0], "none" if model.fields.get(cond[0], True) else "set")


def keys(
    model: Model, given: dict[str, str], inherited: tuple[tuple[str, list[str]], ...] = ()
) -> dict[str, list[str]]:
    """{"keys": always there, "optional": there only when a value is set} for one object.

    `given` maps field → presence ("set"/"none"/"maybe"); fields not given are their default
    (None, where it matters). `inherited` are pops a parent serializer does on this object:
    (key, condition path relative to this object).
    """
    always: list[str] = []
    optional: list[str] = []
    for name, has_default in model.fields.items():
        conds = [c for sub, key, c in model.pops if sub is None and key == name]
        conds += [c for key, c in inherited if key == name]
        if model.msgspec and model.omit_defaults and has_default:
            conds.append([name])
        states = {_state(model, given, c) for c in conds}
        if "none" in states:
            continue
        (always if states <= {"set"} else optional).append(name)
    return {"keys": sorted(always), "optional": sorted(optional)}


def kwargs(call: ast.Call, func: ast.AST | None) -> dict[str, str]:
    return {k.arg: presence(k.value, func) for k in call.keywords if k.arg}


def level_pops(model: Model, sub: str) -> tuple[tuple[str, list[str]], ...]:
    """The pops `model`'s serializer applies inside its field `sub`."""
    return tuple((key, cond[1:]) for s, key, cond in model.pops if s == sub and len(cond) > 1)


def describe(model: Model) -> dict[str, Any]:
    return {
        "source": model.source,
        "kind": "msgspec" if model.msgspec else "pydantic",
        "omit_defaults": model.omit_defaults,
        "fields": list(model.fields),
        "popped_when_none": sorted({key for _, key, _ in model.pops}),
    }
