"""The multi-stream-overlap race's output shapes (the `corrupt` hazard).

On the box the race corrupts the model's tokens, and SGLang's `deepseekv4` parser turns them into
one of (docs/twin.md):
  * `dropped_call`: the invoke block is malformed (dsml.malformed), the detector drops it (fail
    closed): no call, finish_reason "stop". Served through deepseek-recipe (`deepseekv4`,
    Plan.recipe) the call is streamed as decoded and answered whole the same way: its
    arguments are NOT valid JSON, finish_reason "tool_calls" (as 0.5.23 served one; observed/
    recipe-whole-twin-tokens.json);
  * `cross_talk`: a value of ANOTHER in-flight request inside a call whose JSON is valid;
  * `dsml_in_content`: the DSML markup reaches `content` and no call is made.
Otherwise never invalid JSON: the detector builds arguments with json.dumps. Opt-in shapes for tests only:
`invalid_json` (what a broken parser would send) and `garbled_text` (plain text with another
request's words and U+FFFD; the box's text shape was not recorded).

The stream_tools hazard's shapes (below) break only what a streaming parser sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from . import dsml, recipe
from .calls import CALL_DROPPED, CALL_IN_CONTENT, ToolCall, make_calls
from .content import Plan, PseudoText

BOX_SHAPES = ("dropped_call", "cross_talk", "dsml_in_content")
TEST_SHAPES = ("invalid_json", "garbled_text")
ALL_SHAPES = BOX_SHAPES + TEST_SHAPES


def check_shapes(shapes: Sequence[str]) -> tuple[str, ...]:
    """Raises ValueError on an unknown or empty list of shapes."""
    out = tuple(dict.fromkeys(s.strip() for s in shapes if s.strip()))
    unknown = [s for s in out if s not in ALL_SHAPES]
    if unknown or not out:
        raise ValueError(
            f"corruption shapes {list(shapes)!r}: choose one or more of " f"{', '.join(ALL_SHAPES)}"
        )
    return out


def corrupt_plan(
    plan: Plan, other: Plan | None, roll: int, shapes: Sequence[str] = BOX_SHAPES
) -> str | None:
    """Corrupt `plan` in place with one of `shapes` (picked by `roll`); returns the shape used,
    or None when none of them applies (no tool call for a tool shape, no donor for cross-talk)."""
    if plan.tool_call is None:
        if "garbled_text" not in shapes:
            return None
        _garble(plan, other, roll)
        return "garbled_text"
    usable = [
        s
        for s in shapes
        if s != "garbled_text" and (s != "cross_talk" or _cross_talk_keys(plan, other))
    ]
    if not usable:
        return None
    shape = usable[roll % len(usable)]
    call = plan.tool_call
    if shape == "dropped_call":
        if plan.recipe:  # the broken DSML as decoded: the recipe streams it (no drop)
            markup = dsml.malformed(call.markup)
            whole = recipe.whole_calls(recipe.stream_pieces(dsml.tokens(markup)))
            first, *more = [ToolCall(n, a) for n, a in whole]
            call = ToolCall(first.name, first.arguments, markup, tuple(more))
        plan.set_call(call, CALL_DROPPED)
    elif shape == "dsml_in_content":
        plan.set_call(call, CALL_IN_CONTENT)
    elif shape == "cross_talk":
        assert other is not None and other.tool_call is not None
        keys = _cross_talk_keys(plan, other)
        key = keys[(roll // len(usable)) % len(keys)]
        args = json.loads(call.arguments)
        args[key] = json.loads(other.tool_call.arguments)[key]
        rest = [(c.name, json.loads(c.arguments)) for c in call.more]
        plan.set_call(make_calls([(call.name, args), *rest]))
    else:  # invalid_json (tests only): the arguments a broken parser would send
        cut = max(1, len(call.arguments) * 3 // 5)
        plan.set_call(ToolCall(call.name, call.arguments[:cut] + '",,', call.markup, broken=True))
    return shape


def _cross_talk_keys(plan: Plan, other: Plan | None) -> list[str]:
    """String arguments both calls have, with different values (so the swap is visible)."""
    if other is None or other.tool_call is None or plan.tool_call is None:
        return []
    try:
        mine, theirs = json.loads(plan.tool_call.arguments), json.loads(other.tool_call.arguments)
    except ValueError:
        return []
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return []
    return sorted(
        k
        for k, v in mine.items()
        if isinstance(v, str) and isinstance(theirs.get(k), str) and theirs[k] != v
    )


def _garble(plan: Plan, other: Plan | None, roll: int) -> None:
    donor = list(other.text_pieces[:64]) if other is not None and len(other.text_pieces) else [""]
    phase = roll % 3
    if isinstance(plan.text_pieces, PseudoText):
        plan.text_pieces = PseudoText(plan.key, plan.text_pieces.n, (donor, phase))
        return
    pieces = list(plan.text_pieces)
    for i in range(phase, len(pieces), 3):
        pieces[i] = donor[i % len(donor)] + "\ufffd"
    plan.text_pieces = pieces


# The stream_tools hazard: a streaming tool-call parser that breaks calls under load while the
# whole (stream=false) response stays right (docs/twin.md):
#   * `stream_args` (sglang#36339, deepseekv4: malformed streamed arguments, most often with
#     nested arrays): an argument fragment is sent twice where a nested array opens;
#   * `arguments_wrapper` (sglang#38924): the streamed arguments are wrapped in a spurious
#     `{"arguments": ...}` key;
#   * `calls_in_one_delta` (sglang#37634): parallel calls that complete in one increment (as
#     with speculative decoding) lose all but the first.
STREAM_SHAPES = ("stream_args", "arguments_wrapper", "calls_in_one_delta")
_NESTED_ARRAY = re.compile(r"\[\s*[\[{]")


def check_stream_shapes(shapes: Sequence[str]) -> tuple[str, ...]:
    """Raises ValueError on an unknown or empty list of stream shapes."""
    out = tuple(dict.fromkeys(s.strip() for s in shapes if s.strip()))
    unknown = [s for s in out if s not in STREAM_SHAPES]
    if unknown or not out:
        raise ValueError(
            f"stream_tools shapes {list(shapes)!r}: choose one or more of "
            f"{', '.join(STREAM_SHAPES)}"
        )
    return out


def stream_fault(plan: Plan, roll: int, shapes: Sequence[str]) -> str | None:
    """Which of `shapes` (picked by `roll`) breaks this plan's streamed calls, or None when none
    applies (no call; no nested array for `stream_args`; one call for `calls_in_one_delta`)."""
    if plan.tool_call is None:
        return None
    calls = plan.tool_call.all()
    usable = [
        s
        for s in shapes
        if (s != "stream_args" or any(_NESTED_ARRAY.search(c.arguments) for c in calls))
        and (s != "calls_in_one_delta" or len(calls) > 1)
    ]
    return usable[roll % len(usable)] if usable else None


def streamed_fragments(index: int, arguments: str, fault: str | None) -> list[str]:
    """The `arguments` fragments the streaming parser sends for call `index` (one delta each;
    none: the call is lost)."""
    if fault == "calls_in_one_delta" and index > 0:
        return []
    if fault == "arguments_wrapper":
        return ['{"arguments": ', arguments, "}"]
    found = _NESTED_ARRAY.search(arguments) if fault == "stream_args" else None
    if found is None:
        return [arguments]
    # the fragment up to the array's opening is sent again: valid JSON no more
    cut = found.start() + 1
    start = arguments.rfind(",", 0, found.start()) + 1
    return [arguments[:cut], arguments[start:cut], arguments[cut:]]
