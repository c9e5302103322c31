"""HTTP endpoints of an SGLang server: FastAPI route decorators in http_server.py, the routers it
includes, and the Prometheus `/metrics` mount."""

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
    keyword,
    loc,
    parents,
)

HTTP_SERVER = "srt/entrypoints/http_server.py"
METRICS_MOUNT = ("srt/utils/common.py", "add_prometheus_middleware")
VERBS = {"get", "post", "put", "delete", "patch", "head", "options"}


def _path_of(arg: ast.expr | None, names: dict[str, ast.expr]) -> tuple[str | None, str | None]:
    """A route path: a constant, or `os.environ.get("ENV", "/default")` → (default, ENV), also
    through a module-level variable; with no default the path is `${ENV}`."""
    if isinstance(arg, ast.Name) and arg.id in names:
        arg = names[arg.id]
    if (path := const_str(arg)) is not None:
        return path, None
    if isinstance(arg, ast.Call) and ast.unparse(arg.func) == "os.environ.get" and arg.args:
        env = const_str(arg.args[0])
        default = const_str(arg.args[1]) if len(arg.args) > 1 else None
        return (default or (f"${{{env}}}" if env else None)), env
    return None, None


def _route(dec: ast.expr, owners: set[str]) -> tuple[str, list[str], ast.Call] | None:
    """(kind, methods, call) for `@app.get(...)`, `@app.api_route(..., methods=[...])`, ..."""
    if not (
        isinstance(dec, ast.Call)
        and isinstance(dec.func, ast.Attribute)
        and isinstance(dec.func.value, ast.Name)
        and dec.func.value.id in owners
    ):
        return None
    verb = dec.func.attr
    if verb in VERBS:
        return "route", [verb.upper()], dec
    if verb == "api_route":
        return "route", const_strs(keyword(dec, "methods")) or ["GET"], dec
    if verb == "websocket":
        return "websocket", ["WEBSOCKET"], dec
    return None


def routes_in(src: SourceTree, rel: str, owners: set[str]) -> list[dict[str, Any]]:
    tree = src.tree(rel)
    up = parents(tree)
    names = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in node.decorator_list:
            hit = _route(dec, owners)
            if hit is None:
                continue
            kind, methods, call = hit
            path, env = _path_of(call.args[0] if call.args else keyword(call, "path"), names)
            if path is None:
                raise SourceError(
                    f"{PACKAGE}/{loc(rel, call)}: route path is not a constant: "
                    f"{ast.unparse(call)}"
                )
            entry: dict[str, Any] = {
                "path": path,
                "methods": sorted(methods),
                "kind": kind,
                "handler": node.name,
                "source": loc(rel, call),
            }
            if env:
                entry["path_env"] = env
            if conds := enclosing_ifs(node, up):
                entry["condition"] = " and ".join(conds)
            out.append(entry)
    return out


def _included_routers(src: SourceTree) -> list[tuple[str, str]]:
    """(module file, router variable) for each `app.include_router(X)` whose X is imported."""
    tree = src.tree(HTTP_SERVER)
    imported: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            for alias in node.names:
                rel = node.module[len(PACKAGE) + 1 :].replace(".", "/") + ".py"
                imported[alias.asname or alias.name] = (rel, alias.name)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "app.include_router":
            name = node.args[0].id if node.args and isinstance(node.args[0], ast.Name) else None
            if name not in imported:
                raise SourceError(
                    f"{PACKAGE}/{loc(HTTP_SERVER, node)}: cannot resolve the "
                    f"included router {ast.unparse(node)}"
                )
            out.append(imported[name])
    return out


def _metrics_mount(src: SourceTree) -> list[dict[str, Any]]:
    """`Mount("/metrics", make_asgi_app(...))`, added only when the server has --enable-metrics."""
    rel, func = METRICS_MOUNT
    for node in ast.walk(src.tree(rel)):
        if isinstance(node, ast.FunctionDef) and node.name == func:
            mounts = [
                c
                for c in ast.walk(node)
                if isinstance(c, ast.Call)
                and call_name(c) == "Mount"
                and const_str(c.args[0] if c.args else None)
            ]
            break
    else:
        raise SourceError(f"{PACKAGE}/{rel}: {func} not found")
    tree = src.tree(HTTP_SERVER)
    up = parents(tree)
    sites = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and call_name(c) == func]
    if not mounts or not sites:
        raise SourceError(f"{PACKAGE}/{rel}: no Mount in {func}, or {HTTP_SERVER} never calls it")
    cond = " and ".join(enclosing_ifs(sites[0], up))
    return [
        {
            "path": const_str(m.args[0]),
            "methods": ["*"],
            "kind": "mount",
            "handler": "prometheus_client.make_asgi_app",
            "source": loc(rel, m),
            "mounted_at": loc(HTTP_SERVER, sites[0]),
            **({"condition": cond} if cond else {}),
        }
        for m in mounts
    ]


def extract_endpoints(src: SourceTree) -> list[dict[str, Any]]:
    found = routes_in(src, HTTP_SERVER, {"app"})
    for rel, var in _included_routers(src):
        found += routes_in(src, rel, {var})
    found += _metrics_mount(src)
    if not found:
        raise SourceError(f"{PACKAGE}/{HTTP_SERVER}: no routes found")
    return sorted(found, key=lambda e: (e["path"], e["methods"], e["source"]))
