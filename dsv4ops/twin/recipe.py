"""What SGLang 0.5.23 streams of a tool call when it serves DSV4 through deepseek-recipe.

With `--tool-call-parser deepseekv4` (or a DeepseekV4 architecture) 0.5.23 serves chat through
the recipe (`entrypoints/openai/chat_encoding.py` resolve_chat_encoding_spec → "dsv4";
`serving_deepseek_recipe.py` stream_chat_chunks), not through `deepseekv4_detector.py`: its
output parser (`srt/parser/deepseek_recipe_output.py`) is fed each step's new token ids and
streams a call WHILE it is decoded: a header piece (index, name, arguments "") once the invoke's
name is closed, then the arguments JSON as its parts become known (`{` and `"` when a parameter
opens, the key, `"`, `: `, the opening `"` of a string value, the value as it comes, its closing
`"`, `, ` before the next parameter, `}` when the invoke closes); each piece is one SSE chunk
(`chat_encoding_adapters.token_output_sse_chunks`), the header's with the call's id, the
others with id and name null. The joined arguments are `json.dumps` of the parameters.

Derived here from the DSML text decoded so far, and held to the pieces SGLang's own parser made
of the same stand-in tokens (tools/sglang-cpu/recipe_stream_shape.py,
observed/recipe-stream-twin-tokens.json; tests/twin/recipe_test.py).
"""

from __future__ import annotations

import json
import re

from dsv4ops.twin.dsml import INVOKE_END, INVOKE_START, PARAMETER_END, PARAMETER_START, CallPiece

# The tool-call parsers whose chat 0.5.23 serves through deepseek-recipe (chat_encoding.py
# resolve_chat_encoding_spec: "deepseekv4" -> spec "dsv4"; a DeepseekV4 architecture too). Only
# the one the box runs is modelled: the twin speaks DSV4.
RECIPE_TOOL_PARSERS = frozenset({"deepseekv4"})


_INVOKE_NAME = re.compile(r' name="([^"]*)">')
_PARAM_HEAD = re.compile(r' name="')


Atom = tuple[int, str, str | None]  # (call index, text so far, the call's name for its header)
_STRING_KIND = re.compile(r' string="(true|false)">')


def _atoms(text: str) -> list[Atom]:
    """The pieces the recipe has streamed once `text` (a DSML block, as far as it is decoded)
    is read. A growing part (a key, a value) is its text so far."""
    out: list[Atom] = []
    for index, block in enumerate(text.split(INVOKE_START)[1:]):
        head = _INVOKE_NAME.match(block)
        if head is None:
            break  # the name is not closed yet: nothing of this call (nor of later ones)
        out.append((index, "", head.group(1)))
        body = block[head.end() :]
        params = body.split(PARAMETER_START)[1:]
        for j, param in enumerate(params):
            done = _parameter(index, j, param, out)
            if not done:
                break
        if INVOKE_END.rstrip(">") not in body:
            break
        if not params:
            out.append((index, "{", None))
        out.append((index, "}", None))
    return out


def _parameter(index: int, j: int, param: str, out: list[Atom]) -> bool:
    """Append what the recipe streamed of the j-th parameter tag of call `index` (its text
    after `<｜DSML｜parameter`); True once the parameter is closed."""
    if not _PARAM_HEAD.match(param):
        return False
    out += [(index, "{" if j == 0 else ", ", None), (index, '"', None)]
    key, closed, rest = param[len(' name="') :].partition('"')
    if key:
        out.append((index, key, None))
    if not closed:
        return False
    out.append((index, '"', None))
    if not rest.startswith(" string"):
        return False
    out.append((index, ": ", None))
    kind = _STRING_KIND.match(rest)
    if kind is None:
        return False
    is_string = kind.group(1) == "true"
    if is_string:
        out.append((index, '"', None))
    value, ended, _ = rest[kind.end() :].partition(PARAMETER_END.rstrip(">"))
    if value:  # a string as JSON escapes it, inside the quotes; anything else as written
        out.append(
            (index, json.dumps(value, ensure_ascii=False)[1:-1] if is_string else value, None)
        )
    if ended and is_string:
        out.append((index, '"', None))
    return bool(ended)


def whole_calls(steps: list[list[CallPiece]]) -> list[tuple[str, str]]:
    """(name, arguments) of each call, its pieces joined, as `whole_tool_calls` makes the
    stream=false answer (serving_deepseek_recipe.py parse_chat_response): string values as
    written, a malformed value as decoded (observed/recipe-whole-twin-tokens.json)."""
    calls: dict[int, list[str]] = {}
    for piece in (p for step in steps for p in step):
        if piece.name is not None:
            calls[piece.index] = [piece.name, piece.arguments]
        else:
            calls[piece.index][1] += piece.arguments
    return [(name, arguments) for _, (name, arguments) in sorted(calls.items())]


def stream_pieces(tokens: list[str]) -> list[list[CallPiece]]:
    """For each stand-in token of a DSML block, the pieces the recipe streams at that step."""
    steps: list[list[CallPiece]] = []
    before: list[Atom] = []
    text = ""
    for token in tokens:
        text += token
        now = _atoms(text)
        step: list[CallPiece] = []
        for k, (index, part, name) in enumerate(now):
            if name is not None:
                if k >= len(before):
                    step.append(CallPiece(index, name, ""))
                continue
            seen = before[k][1] if k < len(before) else ""
            if part != seen:
                step.append(CallPiece(index, None, part[len(seen) :]))
        steps.append(step)
        before = now
    return steps
