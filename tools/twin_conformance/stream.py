"""The chat stream of /v1/chat/completions: which keys each kind of chunk carries, and the shape
of a tool-call delta (id format, type, one delta per call with the complete arguments)."""

from __future__ import annotations

import ast
import re
from typing import Any

from . import models as m
from .sources import (
    PACKAGE,
    SourceError,
    SourceTree,
    call_name,
    const_str,
    enclosing_ifs,
    find_class,
    find_function,
    loc,
    parents,
)

PROTOCOL = "srt/entrypoints/openai/protocol.py"
SSE_UTILS = "srt/entrypoints/openai/sse_utils.py"
SERVING_CHAT = "srt/entrypoints/openai/serving_chat.py"
PARSERS = "srt/function_call/function_call_parser.py"
CHAT_ENCODING = "srt/entrypoints/openai/chat_encoding.py"
RECIPE_SERVING = "srt/entrypoints/openai/serving_deepseek_recipe.py"
TOOL_CALL_PARSER = "deepseekv4"  # what the DSV4 profiles pass as --tool-call-parser
SSE_KINDS = {  # chunk kind → (keywords the build_sse_content call has, ... it has not)
    "role": ({"role"}, set()),
    "content": ({"content"}, {"role"}),
    "reasoning": ({"reasoning_content"}, {"role"}),
    "finish": ({"finish_reason"}, set()),
}


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    found = [c for c in ast.walk(node) if isinstance(c, ast.Call) and call_name(c) == name]
    return sorted(found, key=lambda c: c.lineno)


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]


def _sse_chunks(src: SourceTree) -> dict[str, Any]:
    """Chunks built by sse_utils.build_sse_content (msgspec structs) at serving_chat's call sites."""
    build = find_function(src.tree(SSE_UTILS), "build_sse_content", SSE_UTILS)
    structs = {
        n: m.read_model(src, SSE_UTILS, n) for n in ("StreamChunk", "StreamChoice", "StreamDelta")
    }
    ctor = {n: _calls(build, n)[0] for n in structs}
    params = {a.arg for a in build.args.args}
    out = {}
    for func in _functions(src.tree(SERVING_CHAT)):
        for call in _calls(func, "build_sse_content"):
            site = m.kwargs(call, func)
            kind = next(
                (
                    k
                    for k, (has, hasnt) in SSE_KINDS.items()
                    if has <= set(site) and not hasnt & set(site) and k not in out
                ),
                None,
            )
            if kind is None:
                continue
            levels = {}
            for level, struct in (
                ("chunk", "StreamChunk"),
                ("choice", "StreamChoice"),
                ("delta", "StreamDelta"),
            ):
                given = {
                    k.arg: (
                        site.get(k.value.id, "none")
                        if isinstance(k.value, ast.Name) and k.value.id in params
                        else m.presence(k.value, build)
                    )
                    for k in ctor[struct].keywords
                    if k.arg
                }
                levels[level] = m.keys(structs[struct], given)
            out[kind] = {
                "source": loc(SERVING_CHAT, call),
                "function": func.name,
                "built_by": f"build_sse_content ({loc(SSE_UTILS, build)})",
                **levels,
            }
    missing = set(SSE_KINDS) - set(out)
    if missing:
        raise SourceError(
            f"{PACKAGE}/{SERVING_CHAT}: no build_sse_content call for " f"{sorted(missing)} chunks"
        )
    return out


def _pydantic(src: SourceTree) -> dict[str, m.Model]:
    names = (
        "ChatCompletionStreamResponse",
        "ChatCompletionResponseStreamChoice",
        "DeltaMessage",
        "ToolCall",
        "FunctionResponse",
        "UsageInfo",
    )
    return {n: m.read_model(src, PROTOCOL, n) for n in names}


def _tool_call_chunk(src: SourceTree, models: dict[str, m.Model]) -> dict[str, Any]:
    func = find_function(
        find_class(src.tree(SERVING_CHAT), "OpenAIServingChat", SERVING_CHAT),
        "_process_tool_call_stream",
        SERVING_CHAT,
    )
    delta = next(
        c for c in _calls(func, "DeltaMessage") if any(k.arg == "tool_calls" for k in c.keywords)
    )
    choice = next(
        c
        for c in _calls(func, "ChatCompletionResponseStreamChoice")
        if any(k.value is delta for k in c.keywords)
    )
    chunk = next(
        c for c in _calls(func, "ChatCompletionStreamResponse") if c.lineno > choice.lineno
    )
    tool = _calls(func, "ToolCall")[0]
    fn = _calls(tool, "FunctionResponse")[0]
    choice_model = models["ChatCompletionResponseStreamChoice"]
    return {
        "source": loc(SERVING_CHAT, chunk),
        "function": func.name,
        "built_by": f"ChatCompletionStreamResponse.model_dump_json ({loc(SERVING_CHAT, chunk)})",
        "chunk": m.keys(models["ChatCompletionStreamResponse"], m.kwargs(chunk, func)),
        "choice": m.keys(choice_model, m.kwargs(choice, func)),
        "delta": m.keys(
            models["DeltaMessage"], m.kwargs(delta, func), m.level_pops(choice_model, "delta")
        ),
        "tool_call": m.keys(models["ToolCall"], m.kwargs(tool, func)),
        "function_keys": m.keys(models["FunctionResponse"], m.kwargs(fn, func)),
    }


def _usage_chunk(src: SourceTree, models: dict[str, m.Model]) -> dict[str, Any]:
    for func in _functions(src.tree(SERVING_CHAT)):
        for call in _calls(func, "ChatCompletionStreamResponse"):
            kw = {k.arg: k.value for k in call.keywords}
            if (
                "usage" in kw
                and isinstance(choices := kw.get("choices"), ast.List)
                and not choices.elts
            ):
                return {
                    "source": loc(SERVING_CHAT, call),
                    "function": func.name,
                    "chunk": m.keys(models["ChatCompletionStreamResponse"], m.kwargs(call, func)),
                    "choices": [],
                    "usage": m.keys(models["UsageInfo"], {}),
                }
    raise SourceError(f"{PACKAGE}/{SERVING_CHAT}: no usage chunk (choices=[], usage=...)")


def _call_id(src: SourceTree) -> dict[str, Any]:
    """`f"call_{uuid.uuid4().hex[:24]}"` in _process_tool_call_id → a regex."""
    tree = src.tree(SERVING_CHAT)
    func = next(f for f in _functions(tree) if f.name == "_process_tool_call_id")
    up = parents(tree)
    for node in ast.walk(func):
        if (
            isinstance(node, ast.JoinedStr)
            and len(node.values) == 2
            and const_str(node.values[0]) == "call_"
        ):
            part = node.values[1]
            text = ast.unparse(part.value) if isinstance(part, ast.FormattedValue) else ""
            width = re.fullmatch(r"uuid\.uuid4\(\)\.hex\[:(\d+)\]", text)
            if width:
                return {
                    "pattern": f"^call_[0-9a-f]{{{width.group(1)}}}$",
                    "expression": ast.unparse(node),
                    "source": loc(SERVING_CHAT, node),
                    "condition": " and ".join(enclosing_ifs(node, up)),
                }
    raise SourceError(f"{PACKAGE}/{SERVING_CHAT}: _process_tool_call_id builds no call_<hex> id")


def _resolve_class(src: SourceTree, rel: str, name: str) -> tuple[str, ast.ClassDef]:
    """The file and ClassDef of `name` as seen from `rel` (defined there or imported)."""
    tree = src.tree(rel)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return rel, node
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and any(a.name == name for a in node.names)
        ):
            target = node.module[len(PACKAGE) + 1 :].replace(".", "/") + ".py"
            return _resolve_class(src, target, name)
    raise SourceError(f"{PACKAGE}/{rel}: class {name} not found")


def _detector(src: SourceTree) -> dict[str, Any]:
    """The streaming parser of --tool-call-parser deepseekv4: what each emitted call item holds."""
    enum = next(
        n
        for n in ast.walk(src.tree(PARSERS))
        if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "ToolCallParserEnum"
    )
    assert isinstance(enum.value, ast.Dict), "ToolCallParserEnum is a dict literal"
    mapping = {
        const_str(k): ast.unparse(v)
        for k, v in zip(enum.value.keys, enum.value.values, strict=True)
    }
    cls_name = mapping.get(TOOL_CALL_PARSER)
    if cls_name is None:
        raise SourceError(f"{PACKAGE}/{PARSERS}: no {TOOL_CALL_PARSER!r} tool-call parser")
    rel, cls = _resolve_class(src, PARSERS, cls_name)
    chain = [cls_name]
    while not any(
        isinstance(n, ast.FunctionDef) and n.name == "parse_streaming_increment" for n in cls.body
    ):
        base = ast.unparse(cls.bases[0])
        rel, cls = _resolve_class(src, rel, base)
        chain.append(base)
    method = find_function(cls, "parse_streaming_increment", rel)
    items = [
        {"source": loc(rel, c), "keywords": sorted(k.arg for k in c.keywords if k.arg)}
        for c in _calls(method, "ToolCallItem")
    ]
    if not items:
        raise SourceError(
            f"{PACKAGE}/{rel}: {chain[-1]}.parse_streaming_increment emits no " "ToolCallItem"
        )
    return {
        "tool_call_parser": TOOL_CALL_PARSER,
        "detector": " -> ".join(chain),
        "method": loc(rel, method),
        "items": items,
        "one_delta_per_call": all({"name", "parameters"} <= set(i["keywords"]) for i in items),
    }


def _served_by(src: SourceTree) -> dict[str, Any] | None:
    """The chat encoding spec --tool-call-parser deepseekv4 selects (chat_encoding.py
    resolve_chat_encoding_spec: `if tool_call_parser == "deepseekv4": return "dsv4"`) and the
    recipe's streaming method, when the wheel has them: such a spec serves chat through
    deepseek-recipe, whose parser streams a call piece by piece, not the detector's one delta."""
    if not src.exists(CHAT_ENCODING):
        return None
    resolve = find_function(src.tree(CHAT_ENCODING), "resolve_chat_encoding_spec", CHAT_ENCODING)
    for node in ast.walk(resolve):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
            continue
        test = node.test
        if (
            ast.unparse(test.left) == "tool_call_parser"
            and len(test.comparators) == 1
            and const_str(test.comparators[0]) == TOOL_CALL_PARSER
            and isinstance(node.body[0], ast.Return)
        ):
            spec = const_str(node.body[0].value)
            stream = None
            if src.exists(RECIPE_SERVING):
                stream = next(
                    (
                        loc(RECIPE_SERVING, f)
                        for f in ast.walk(src.tree(RECIPE_SERVING))
                        if isinstance(f, ast.FunctionDef) and f.name == "stream_chat_chunks"
                    ),
                    None,
                )
            return {"encoding_spec": spec, "source": loc(CHAT_ENCODING, node), "stream": stream}
    return None


def extract_stream(src: SourceTree) -> dict[str, Any]:
    models = _pydantic(src)
    chunks = _sse_chunks(src)
    chunks["tool_call"] = _tool_call_chunk(src, models)
    chunks["usage"] = _usage_chunk(src, models)
    tool_type = next(
        (
            const_str(n.value)
            for n in find_class(src.tree(PROTOCOL), "ToolCall", PROTOCOL).body
            if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "type"
        ),
        None,
    )
    detector = _detector(src)
    served_by = _served_by(src)
    delta = chunks["tool_call"]
    return {
        "chunks": chunks,
        "models": {n: m.describe(x) for n, x in models.items()},
        "tool_call_delta": {
            "id": _call_id(src),
            "type": tool_type,
            "keys": delta["tool_call"]["keys"],
            "function_keys": delta["function_keys"]["keys"],
            # the detector's shape, unless deepseekv4 is served through an encoding spec
            "one_delta_per_call": detector["one_delta_per_call"] and served_by is None,
            "parser": detector,
            "served_by": served_by,
        },
    }
