"""DSML, DeepSeek-V4's tool-call markup, as the model emits it and SGLang's `deepseekv4` parser
reads it (srt/function_call/deepseekv32_detector.py, deepseekv4_detector.py in SGLang 0.5.23).

The twin renders a call in the XML-parameter form, splits it into stand-in tokens (every tag
opener such as `<｜DSML｜invoke` is one token) and decodes it for exactly as many steps as it has
tokens. The detector sends nothing while an invoke block is open and, when it closes, ONE delta
with the whole call; its `arguments` are `json.dumps(parameters, ensure_ascii=False)` of the
parsed parameters (string values stripped), so they are always valid JSON. Served with
`--tool-call-parser deepseekv4`, 0.5.23 parses with deepseek-recipe instead, which streams the
same arguments piece by piece while the invoke is decoded (twin/recipe.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DSML_TOKEN = "｜DSML｜"  # U+FF5C on both sides, exactly as the detector's `dsml_token`
TOOL_CALLS_START = f"<{DSML_TOKEN}tool_calls>"
TOOL_CALLS_END = f"</{DSML_TOKEN}tool_calls>"
INVOKE_START = f"<{DSML_TOKEN}invoke"
INVOKE_END = f"</{DSML_TOKEN}invoke>"
PARAMETER_START = f"<{DSML_TOKEN}parameter"
PARAMETER_END = f"</{DSML_TOKEN}parameter>"
THINK_END = "</think>"  # DSV4's end-of-reasoning token (srt/parser/reasoning_parser.py)

# A DSML tag opener is one token; the rest is words and runs of punctuation (`="`, `">`: BPE
# merges them), leading space kept, so the tokens join back to the exact text. A run of
# punctuation stops before a tag opener (`"]` then `</｜DSML｜parameter`): ｜DSML｜ is a token of
# its own in DSV4's tokenizer, never merged into the value before it.
_TOKEN_RE = re.compile(rf"\s*(?:</?{DSML_TOKEN}\w+|\w+|(?:(?!</?{DSML_TOKEN})[^\w\s])+)")


def render_call(name: str, args: Mapping[str, object]) -> str:
    """One call as a complete `tool_calls` block, one parameter tag per argument."""
    return render_calls([(name, args)])


def render_calls(calls: Sequence[tuple[str, Mapping[str, object]]]) -> str:
    """Calls in one `tool_calls` block, one invoke each (parallel calls)."""
    lines = [TOOL_CALLS_START]
    for name, args in calls:
        lines.append(f'{INVOKE_START} name="{name}">')
        for key, value in args.items():
            if isinstance(value, str):
                lines.append(f'{PARAMETER_START} name="{key}" string="true">{value}{PARAMETER_END}')
            else:
                text = json.dumps(value, ensure_ascii=False)
                lines.append(f'{PARAMETER_START} name="{key}" string="false">{text}{PARAMETER_END}')
        lines.append(INVOKE_END)
    lines.append(TOOL_CALLS_END)
    return "\n".join(lines)


def parsed_arguments(args: Mapping[str, object]) -> str:
    """The `arguments` string SGLang's parser makes of those parameter tags."""
    parsed = {k: v.strip() if isinstance(v, str) else v for k, v in args.items()}
    return json.dumps(parsed, ensure_ascii=False)


# A parameter tag's kind and value (the first one of a block is the one the race breaks).
_PARAM_VALUE = re.compile(rf'( string=")(?:true|false)(">)(.*?)({re.escape(PARAMETER_END)})', re.S)


def malformed(markup: str) -> str:
    """The DSML of a call the multi-stream race broke, as the box decoded one (docs/twin.md,
    observed/served-recipe-stream.txt): the first parameter declared non-string, its value cut
    and left in an open array, so no parser can read it as JSON (a parameter is added to a
    call without one). The detector drops such an invoke; deepseek-recipe streams it as
    written (twin/recipe.py)."""
    found = _PARAM_VALUE.search(markup)
    if found is None:
        at = markup.index(INVOKE_END)
        return f'{markup[:at]}{PARAMETER_START} name="arguments" string="false">[{PARAMETER_END}\n{markup[at:]}'
    value = found.group(3)
    broken = value[: len(value) // 2] + "["
    return (
        markup[: found.start()]
        + f"{found.group(1)}false{found.group(2)}{broken}{found.group(4)}"
        + markup[found.end() :]
    )


def tokens(text: str) -> list[str]:
    """Stand-in tokens of DSML text (joined, they are the text)."""
    return _TOKEN_RE.findall(text) or [text]


@dataclass(frozen=True)
class CallPiece:
    """One streamed piece of a call as the deepseek-recipe path sends it (twin/recipe.py): the
    header (name set, arguments "") or a part of its arguments (name None)."""

    index: int
    name: str | None
    arguments: str


class CallPart(str):
    """A token inside an invoke block; `parts`: what the recipe path streams at it."""

    parts: tuple[CallPiece, ...]

    def __new__(cls, text: str, parts: tuple[CallPiece, ...]) -> CallPart:
        token = super().__new__(cls, text)
        token.parts = parts
        return token


class CallEnd(str):
    """The token that closes an invoke block; it carries the call the parser then emits (and
    its place among the response's calls); `parts`: what the recipe path streams at it (the
    closing `}`)."""

    name: str
    arguments: str
    call_index: int
    parts: tuple[CallPiece, ...]

    def __new__(
        cls,
        text: str,
        name: str,
        arguments: str,
        call_index: int = 0,
        parts: tuple[CallPiece, ...] = (),
    ) -> CallEnd:
        token = super().__new__(cls, text)
        token.name, token.arguments, token.call_index = name, arguments, call_index
        token.parts = parts
        return token
