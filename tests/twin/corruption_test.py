"""The corrupt hazard's shapes: what SGLang's deepseekv4 parser makes of a corrupted call."""

from __future__ import annotations

import json

import pytest

from dsv4ops.twin.calls import Piece
from dsv4ops.twin.config import TwinConfigError, load_config
from dsv4ops.twin.content import ChatOptions, Plan, plan_chat
from dsv4ops.twin.corruption import (
    BOX_SHAPES,
    STREAM_SHAPES,
    check_shapes,
    check_stream_shapes,
    corrupt_plan,
    stream_fault,
    streamed_fragments,
)
from dsv4ops.twin.dsml import CallEnd

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "nonce": {"type": "string"}},
        },
    },
}


def _call(query: str, nonce: str) -> Plan:
    msgs = [{"role": "user", "content": f'CALL search {{"query": "{query}", "nonce": "{nonce}"}}'}]
    return plan_chat(msgs, [SEARCH], "auto", 300)


def _pieces(plan: Plan) -> list[Piece]:
    return [plan.piece(i) for i in range(plan.token_count())]


def _call_end(text: str) -> CallEnd:
    assert isinstance(text, CallEnd)  # a "call" piece carries what the parser made of the call
    return text


def test_dropped_call_decodes_the_dsml_but_makes_no_call_and_stops() -> None:
    plan = _call("a", "n1")
    assert corrupt_plan(plan, None, 0, ["dropped_call"]) == "dropped_call"
    assert {k for k, _ in _pieces(plan)} == {"hidden"}
    assert plan.finish_reason() == "stop"


def test_cross_talk_puts_another_requests_value_into_valid_json() -> None:
    mine, other = _call("a", "n1"), _call("b", "n2")
    assert corrupt_plan(mine, other, 0, ["cross_talk"]) == "cross_talk"
    calls = [t for k, t in _pieces(mine) if k == "call"]
    assert len(calls) == 1
    args = json.loads(_call_end(calls[0]).arguments)  # always valid JSON
    assert args in ({"query": "b", "nonce": "n1"}, {"query": "a", "nonce": "n2"})
    assert mine.finish_reason() == "tool_calls"
    # the model emitted the other request's value: the markup says so too
    assert _call_end(calls[0]).arguments == json.dumps(args, ensure_ascii=False)


def test_cross_talk_without_a_donor_does_not_apply() -> None:
    lone = _call("a", "n1")
    assert corrupt_plan(lone, None, 0, ["cross_talk"]) is None
    assert lone.finish_reason() == "tool_calls"


def test_dsml_in_content_streams_the_markup_as_content_without_a_call() -> None:
    plan = _call("a", "n1")
    assert corrupt_plan(plan, None, 0, ["dsml_in_content"]) == "dsml_in_content"
    pieces = _pieces(plan)
    assert {k for k, _ in pieces} == {"text"} and plan.finish_reason() == "stop"
    content = "".join(t for _, t in pieces)
    assert (
        content.startswith("<｜DSML｜tool_calls>") and '<｜DSML｜invoke name="search">' in content
    )
    assert "</｜DSML｜parameter>" in content and content.endswith("</｜DSML｜tool_calls>")


def test_box_shapes_never_make_invalid_json_and_the_default_mix_uses_all_three() -> None:
    seen: set[str | None] = set()
    for roll in range(30):
        plan, other = _call("a", "n1"), _call("b", "n2")
        shape = corrupt_plan(plan, other, roll)
        seen.add(shape)
        for kind, text in _pieces(plan):
            if kind == "call":
                json.loads(_call_end(text).arguments)
    assert seen == set(BOX_SHAPES)


@pytest.mark.parametrize("recipe", [False, True], ids=["detector", "recipe"])
def test_invalid_json_and_garbled_text_are_opt_in_test_shapes(recipe: bool) -> None:
    msgs = [{"role": "user", "content": 'CALL search {"query": "a", "nonce": "n1"}'}]
    plan = plan_chat(msgs, [SEARCH], "auto", 300, ChatOptions(recipe=recipe))
    assert corrupt_plan(plan, None, 0, ["invalid_json"]) == "invalid_json"
    call = next(t for k, t in _pieces(plan) if k == "call")
    with pytest.raises(ValueError):  # the whole answer's, whatever the parser
        json.loads(_call_end(call).arguments)
    text = plan_chat([{"role": "user", "content": "story"}], None, "auto", 9)
    assert corrupt_plan(text, None, 1) is None  # box shapes leave plain text alone
    assert corrupt_plan(text, None, 1, ["garbled_text"]) == "garbled_text"
    assert any("\ufffd" in p for p in text.text_pieces)


def test_shapes_from_the_environment_are_checked() -> None:
    assert load_config({}).corrupt_shapes == BOX_SHAPES
    cfg = load_config({"DSV4_TWIN_CORRUPT_SHAPES": "cross_talk, dsml_in_content"})
    assert cfg.corrupt_shapes == ("cross_talk", "dsml_in_content")
    with pytest.raises(TwinConfigError, match="CORRUPT_SHAPES.*choose one or more of"):
        load_config({"DSV4_TWIN_CORRUPT_SHAPES": "cross_talk,bogus"})
    with pytest.raises(ValueError):
        check_shapes([])


# --- the stream_tools hazard: what a broken streaming parser sends (the whole answer is right) --

NESTED = {"nonce": "n1", "edits": [{"path": "a.py", "hunks": [{"start": 1, "lines": ["x"]}]}]}


def _parallel() -> Plan:
    prompt = f'CALL search {json.dumps(NESTED)}\nCALL search {{"query": "b", "nonce": "n1"}}'
    return plan_chat([{"role": "user", "content": prompt}], [SEARCH], "auto", 400)


def test_parallel_calls_are_planned_in_one_dsml_block_and_parsed_one_by_one() -> None:
    plan = _parallel()
    calls = [_call_end(p) for k, p in _pieces(plan) if k == "call"]
    assert [(c.call_index, c.name) for c in calls] == [(0, "search"), (1, "search")]
    assert json.loads(calls[0].arguments) == NESTED
    assert json.loads(calls[1].arguments) == {"query": "b", "nonce": "n1"}
    assert plan.finish_reason() == "tool_calls"


def test_each_stream_shape_applies_only_where_it_can_show() -> None:
    single = _call("flat", "n1")  # one call, no nested array
    assert [stream_fault(single, r, STREAM_SHAPES) for r in range(3)] == ["arguments_wrapper"] * 3
    assert stream_fault(single, 0, ["stream_args", "calls_in_one_delta"]) is None
    text = plan_chat([{"role": "user", "content": "story"}], None, "auto", 9)
    assert stream_fault(text, 0, STREAM_SHAPES) is None
    parallel = _parallel()
    assert {stream_fault(parallel, r, STREAM_SHAPES) for r in range(3)} == set(STREAM_SHAPES)


def test_the_streamed_fragments_of_each_shape() -> None:
    args = json.dumps(NESTED)
    assert streamed_fragments(0, args, None) == [args]
    assert streamed_fragments(1, args, "calls_in_one_delta") == []  # lost
    assert streamed_fragments(0, args, "calls_in_one_delta") == [args]
    wrapped = json.loads("".join(streamed_fragments(0, args, "arguments_wrapper")))
    assert wrapped == {"arguments": NESTED}
    broken = streamed_fragments(0, args, "stream_args")
    assert len(broken) == 3 and "".join(broken) != args and broken[0] + broken[2] == args
    with pytest.raises(ValueError):
        json.loads("".join(broken))
    flat = json.dumps({"query": "q"})
    assert streamed_fragments(0, flat, "stream_args") == [flat]  # no nested array: intact


def test_stream_shapes_from_the_environment_are_checked() -> None:
    cfg = load_config({})
    assert (cfg.stream_tools_shapes, cfg.stream_tools_min_bs) == (STREAM_SHAPES, 16)
    cfg = load_config({"DSV4_TWIN_STREAM_TOOLS_SHAPES": "stream_args"})
    assert cfg.stream_tools_shapes == ("stream_args",)
    with pytest.raises(TwinConfigError, match="STREAM_TOOLS_SHAPES.*choose one or more of"):
        load_config({"DSV4_TWIN_STREAM_TOOLS_SHAPES": "dropped_call"})
    with pytest.raises(ValueError):
        check_stream_shapes([" "])
