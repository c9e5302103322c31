"""The multi-stream-overlap race's output shapes (the `corrupt` hazard).

On the box the race corrupts the model's tokens, and SGLang's `deepseekv4` parser turns them into
one of (docs/twin.md):
  * `dropped_call`: the invoke block is malformed, the parser drops it (fail closed): no call,
    finish_reason "stop";
  * `cross_talk`: a value of ANOTHER in-flight request inside a call whose JSON is valid;
  * `dsml_in_content`: the DSML markup reaches `content` and no call is made.
Never invalid JSON: the parser builds arguments with json.dumps. Opt-in shapes for tests only:
`invalid_json` (what a broken parser would send) and `garbled_text` (plain text with another
request's words and U+FFFD; the box's text shape was not recorded).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .content import CALL_DROPPED, CALL_IN_CONTENT, Plan, PseudoText, ToolCall, make_call

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
        plan.set_call(call, CALL_DROPPED)
    elif shape == "dsml_in_content":
        plan.set_call(call, CALL_IN_CONTENT)
    elif shape == "cross_talk":
        assert other is not None and other.tool_call is not None
        keys = _cross_talk_keys(plan, other)
        key = keys[(roll // len(usable)) % len(keys)]
        args = json.loads(call.arguments)
        args[key] = json.loads(other.tool_call.arguments)[key]
        plan.set_call(make_call(call.name, args))
    else:  # invalid_json (tests only): the arguments a broken parser would send
        cut = max(1, len(call.arguments) * 3 // 5)
        plan.set_call(ToolCall(call.name, call.arguments[:cut] + '",,', call.markup))
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
