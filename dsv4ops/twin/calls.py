"""A tool call the twin's model emits, and what SGLang's tool-call parser makes of its DSML,
token by token: the detector (one delta per call when its invoke closes, string values stripped,
a malformed invoke dropped) or deepseek-recipe (`--tool-call-parser deepseekv4`: pieces while it
is decoded, values as written, a malformed invoke streamed as decoded; twin/recipe.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import dsml, recipe

# Output pieces: (kind, text). Kinds: "reasoning" (a reasoning_content delta), "text" (content),
# "hidden" (decoded but not streamed: DSML the parser holds, `</think>`), "call" (the token that
# closes an invoke block; its text is a dsml.CallEnd carrying the call), "call_part" (a token
# inside an invoke at which the recipe path streams a piece: dsml.CallPart; hidden otherwise).
Piece = tuple[str, str]
# What the tool-call parser makes of the DSML the model emitted.
CALL_PARSED = "parsed"  # one delta with the whole call
# a malformed invoke: the detector drops it, fail closed (no call, finish "stop"); through
# deepseek-recipe (Plan.recipe) it is streamed as decoded, arguments not JSON, "tool_calls"
CALL_DROPPED = "dropped"
CALL_IN_CONTENT = "in_content"  # not parsed: the markup is streamed as content


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI carries it (what the parser makes of `markup`)
    markup: str = ""  # the DSML the model emits for it (and for `more`)
    more: tuple[ToolCall, ...] = ()  # parallel calls after it, in the same DSML block
    # `arguments` are what a broken parser sends (the test-only `invalid_json` shape), not what
    # any parser makes of `markup`: answered whole as they are, whatever the parser
    broken: bool = False

    def all(self) -> list[ToolCall]:
        return [self, *self.more]


def make_call(name: str, args: Mapping[str, object]) -> ToolCall:
    return ToolCall(name, dsml.parsed_arguments(args), dsml.render_call(name, args))


def make_calls(calls: Sequence[tuple[str, Mapping[str, object]]]) -> ToolCall:
    """Parallel calls: the first carries the DSML of all and the rest in `more`."""
    first, *rest = [ToolCall(n, dsml.parsed_arguments(a)) for n, a in calls]
    return ToolCall(first.name, first.arguments, dsml.render_calls(calls), tuple(rest))


def call_pieces(call: ToolCall, shape: str, by_recipe: bool = False) -> list[Piece]:
    toks = dsml.tokens(call.markup)
    if shape == CALL_IN_CONTENT:
        return [("text", t) for t in toks]
    pieces: list[Piece] = [("hidden", t) for t in toks]
    if shape == CALL_PARSED or (by_recipe and shape == CALL_DROPPED):
        # what the recipe path streams at each token (formats.py sends it for deepseekv4)
        streamed = recipe.stream_pieces(toks)
        # the whole answer's calls: the detector's (string values stripped), or the recipe's
        # pieces joined (as written; a malformed invoke as decoded)
        calls = (
            [ToolCall(n, a) for n, a in recipe.whole_calls(streamed)]
            if by_recipe and not call.broken
            else call.all()
        )
        total, text = len(calls), ""
        for i, t in enumerate(toks):  # the detector emits each call when its invoke closes
            text += t
            parts = tuple(streamed[i])
            if text.endswith(dsml.INVOKE_END) and calls:
                n = total - len(calls)
                done = calls.pop(0)
                pieces[i] = ("call", dsml.CallEnd(t, done.name, done.arguments, n, parts))
            elif parts:
                pieces[i] = ("call_part", dsml.CallPart(t, parts))
    return pieces
