"""Prometheus metric definitions of SGLang (`Counter/Gauge/Histogram/Summary(name="sglang:...")`).

For each: the declared name, the family name prometheus_client's parser reports (a counter's
`_total` is dropped), the type, the label names, the multiprocess mode, where it is defined and
under which condition. Label names given as `labels.keys()` are resolved through the label set of
the collector class (the dict its builder makes); extra label values are read from the
`.labels(..., mode=...)` calls when they are constants or a loop over constants.
"""

from __future__ import annotations

import ast
from typing import Any

from .sources import (
    PACKAGE,
    SourceError,
    SourceTree,
    call_name,
    const_str,
    const_strs,
    enclosing_ifs,
    find_class,
    find_function,
    keyword,
    loc,
    parents,
)

METRICS_COLLECTOR = "srt/observability/metrics_collector.py"
GAUGE_HISTOGRAM = "srt/utils/gauge_histogram.py"
# Collector class → (file, builder function "Class.method" or "function", dict variable).
LABEL_SET_BUILDERS = {
    "SchedulerMetricsCollector": (
        METRICS_COLLECTOR,
        "SchedulerMetricsCollector.init_new",
        "labels",
    ),
    "TokenizerMetricsCollector": (METRICS_COLLECTOR, "tokenizer_metric_labels", "labels"),
}
CTORS = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "GaugeHistogram": "gauge",
}
# prometheus_client multiprocess mode keeps a `pid` label on gauges in these modes only.
PID_MODES = {"all", "liveall"}
SCAN_ROOT = "srt/"
# How a collector names its own label set in `labelnames=`.
LABEL_SET_REFS = {
    "labels.keys()",
    "list(labels.keys())",
    "self.labels.keys()",
    "list(self.labels.keys())",
}


def _label_names(expr: ast.expr | None) -> tuple[bool, list[str]] | None:
    """(uses the collector's label set, extra names) for a `labelnames=` expression."""
    if expr is None:
        return False, []
    if (names := const_strs(expr)) is not None:
        return False, names
    text = ast.unparse(expr)
    if text in LABEL_SET_REFS:
        return True, []
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _label_names(expr.left), _label_names(expr.right)
        if left is not None and right is not None:
            return left[0] or right[0], left[1] + right[1]
        return None
    if isinstance(expr, ast.List):
        base, extra = False, []
        for elt in expr.elts:
            if isinstance(elt, ast.Starred) and ast.unparse(elt.value) in LABEL_SET_REFS:
                base = True
            elif (name := const_str(elt)) is not None:
                extra.append(name)
            else:
                return None
        return base, extra
    return None


def _definitions(tree: ast.Module) -> list[tuple[ast.Call, str | None, str, ast.AST]]:
    """(ctor call, class name, owner "Class.func", assignment target) for each sglang: metric."""
    out: list[tuple[ast.Call, str | None, str, ast.AST]] = []

    def visit(node: ast.AST, cls: str | None, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name, child.name)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, cls, f"{cls}.{child.name}" if cls else child.name)
                continue
            if isinstance(child, ast.Call) and call_name(child) in CTORS:
                name = const_str(keyword(child, "name") or (child.args[0] if child.args else None))
                if name and name.startswith("sglang:"):
                    out.append((child, cls, owner, node))
            visit(child, cls, owner)

    visit(tree, None, "<module>")
    return out


def _gauge_histogram_extras(src: SourceTree) -> tuple[list[str], str, str]:
    """GaugeHistogram adds bucket labels: `labelnames=list(labelnames) + ["gt", "le"]`."""
    cls = find_class(src.tree(GAUGE_HISTOGRAM), "GaugeHistogram", GAUGE_HISTOGRAM)
    init = find_function(cls, "__init__", GAUGE_HISTOGRAM)
    default_mode = (
        next(
            (
                const_str(d)
                for a, d in zip(
                    init.args.args[-len(init.args.defaults) :], init.args.defaults, strict=True
                )
                if a.arg == "multiprocess_mode"
            ),
            None,
        )
        if init.args.defaults
        else None
    )
    for node in ast.walk(init):
        if isinstance(node, ast.Call) and call_name(node) == "Gauge":
            expr = keyword(node, "labelnames")
            if isinstance(expr, ast.BinOp) and (extra := const_strs(expr.right)):
                return extra, default_mode or "all", loc(GAUGE_HISTOGRAM, node)
    raise SourceError(f"{PACKAGE}/{GAUGE_HISTOGRAM}: GaugeHistogram's Gauge labelnames not found")


def label_sets(src: SourceTree) -> dict[str, dict[str, Any]]:
    """Each collector's base labels (the dict literal) and optional ones (set under an `if`)."""
    out = {}
    for cls_name, (rel, builder, var) in LABEL_SET_BUILDERS.items():
        tree = src.tree(rel)
        owner, _, func_name = builder.rpartition(".")
        scope = find_class(tree, owner, rel) if owner else tree
        func = find_function(scope, func_name, rel)
        base: list[str] = []
        optional: list[str] = []
        configurable: list[str] = []  # labels an operator adds by flag (custom/extra labels)
        source = None
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == var for t in node.targets)
            ):
                base = [k for k in (const_str(key) for key in node.value.keys) if k]
                source = loc(rel, node)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(t := node.targets[0], ast.Subscript)
                and ast.unparse(t.value) == var
            ):
                key = const_str(t.slice)
                (
                    optional.append(key)
                    if key
                    else configurable.append(f"{ast.unparse(t)} ({loc(rel, node)})")
                )
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == f"{var}.update":
                configurable.append(f"{ast.unparse(node)} ({loc(rel, node)})")
        if source is None:
            raise SourceError(f"{PACKAGE}/{rel}: {builder} builds no `{var} = {{...}}` dict")
        out[cls_name] = {
            "labels": base,
            "optional": optional,
            "configurable": configurable,
            "source": source,
            "builder": builder,
        }
    return out


def _label_values(tree: ast.Module) -> dict[tuple[str, str], set[str]]:
    """(attribute, label) → constant values from `self.<attr>.labels(..., label=V)` calls."""
    out: dict[tuple[str, str], set[str]] = {}
    up = parents(tree)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "labels"
            and isinstance(node.func.value, ast.Attribute)
            and ast.unparse(node.func.value.value) == "self"
        ):
            continue
        for kw in node.keywords:
            if kw.arg is None:
                continue
            values = _const_values(kw.value, node, up)
            if values:
                out.setdefault((node.func.value.attr, kw.arg), set()).update(values)
    return out


def _const_values(expr: ast.expr, at: ast.AST, up: dict[ast.AST, ast.AST]) -> list[str]:
    """A constant, or a loop variable over a literal list of constants (or of tuples)."""
    if (value := const_str(expr)) is not None:
        return [value]
    if not isinstance(expr, ast.Name):
        return []
    cur = up.get(at)
    while cur is not None and not isinstance(cur, ast.FunctionDef | ast.AsyncFunctionDef):
        if isinstance(cur, ast.For) and isinstance(cur.iter, ast.List | ast.Tuple):
            if isinstance(cur.target, ast.Name) and cur.target.id == expr.id:
                return [v for v in (const_str(e) for e in cur.iter.elts) if v]
            if isinstance(cur.target, ast.Tuple):
                pos = [
                    i
                    for i, t in enumerate(cur.target.elts)
                    if isinstance(t, ast.Name) and t.id == expr.id
                ]
                if pos:
                    return [
                        v
                        for v in (
                            const_str(e.elts[pos[0]])
                            for e in cur.iter.elts
                            if isinstance(e, ast.Tuple)
                        )
                        if v
                    ]
        cur = up.get(cur)
    return []


def _metric_entry(
    src: SourceTree,
    rel: str,
    call: ast.Call,
    cls: str | None,
    owner: str,
    sets: dict[str, dict[str, Any]],
    gh: tuple[list[str], str, str],
    up: dict[ast.AST, ast.AST],
) -> dict[str, Any]:
    ctor = call_name(call) or ""
    name = const_str(keyword(call, "name") or call.args[0]) or ""
    label_expr = keyword(call, "labelnames") or (call.args[2] if len(call.args) > 2 else None)
    resolved = _label_names(label_expr)
    if resolved is None:
        raise SourceError(
            f"{PACKAGE}/{loc(rel, call)}: cannot resolve labelnames "
            f"{ast.unparse(label_expr) if label_expr else ''}"
        )
    uses_set, extra = resolved
    mode = const_str(keyword(call, "multiprocess_mode"))
    if ctor == "GaugeHistogram":
        extra = extra + gh[0]
        mode = mode or gh[1]
    kind = CTORS[ctor]
    entry: dict[str, Any] = {
        "name": name,
        "family": name.removesuffix("_total") if kind == "counter" else name,
        "type": kind,
        "source": loc(rel, call),
        "owner": owner,
    }
    label_set = cls if uses_set else None
    if uses_set and cls not in sets:
        entry["labels"] = None  # the caller's dict; not needed for a PD prefill/decode server
        entry["label_set_unresolved"] = cls
    else:
        base = sets[label_set]["labels"] if label_set else []
        entry["labels"] = base + extra
    if label_set:
        entry["label_set"] = label_set
    if kind == "gauge":
        entry["multiprocess_mode"] = mode or "all"
        entry["pid_label"] = (mode or "all") in PID_MODES
    if ctor == "GaugeHistogram":
        entry["defined_as"] = f"GaugeHistogram ({gh[2]})"
    if conds := enclosing_ifs(call, up):
        entry["condition"] = " and ".join(conds)
    return entry


def extract_metrics(src: SourceTree) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    sets = label_sets(src)
    gh = _gauge_histogram_extras(src)
    metrics: list[dict[str, Any]] = []
    for rel in src.names(SCAN_ROOT):
        known = rel in src.read_sha256
        definitions = _definitions(src.tree(rel)) if '"sglang:' in src.text(rel) else []
        if not definitions and not known:
            src.read_sha256.pop(rel, None)  # only files that define metrics are sources
            continue
        tree = src.tree(rel)
        up = parents(tree)
        values = _label_values(tree)
        for call, cls, owner, parent in definitions:
            entry = _metric_entry(src, rel, call, cls, owner, sets, gh, up)
            attr = _assigned_attr(parent, call)
            label_set = entry.get("label_set")  # None: no label set (and no such key in sets)
            extra = set(entry["labels"] or ()) - set(
                (sets.get(label_set, {}) if label_set is not None else {}).get("labels", ())
            )
            found = {
                label: sorted(vals)
                for (a, label), vals in values.items()
                if a == attr and label in extra
            }
            if found:
                entry["label_values"] = found
            metrics.append(entry)
    if not metrics:
        raise SourceError(f"no sglang: metric definitions under {PACKAGE}/{SCAN_ROOT}")
    return sorted(metrics, key=lambda m: (m["name"], m["source"])), sets


def _assigned_attr(parent: ast.AST, call: ast.Call) -> str | None:
    """`self.x = Counter(...)` → "x"."""
    if isinstance(parent, ast.Assign) and parent.value is call:
        target = parent.targets[0]
        if isinstance(target, ast.Attribute):
            return target.attr
    return None
