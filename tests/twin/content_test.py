from __future__ import annotations

import json
from typing import Any

from dsv4ops.twin.content import ChatOptions, plan_chat, plan_completion
from dsv4ops.twin.dsml import CallEnd

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "nonce": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["c", "f"]},
            },
            "required": ["city", "nonce", "days", "unit"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def test_call_convention_gives_exactly_the_given_arguments() -> None:
    plan = plan_chat(
        _user('CALL search {"query": "pd restart", "nonce": "x1"}'), [WEATHER, SEARCH], "auto", 200
    )
    assert plan.tool_call is not None and plan.tool_call.name == "search"
    assert json.loads(plan.tool_call.arguments) == {"query": "pd restart", "nonce": "x1"}


def test_named_values_fill_the_schema_and_the_rest_is_generated_deterministically() -> None:
    plan = plan_chat(
        _user("weather please: get_weather city=Paris nonce=ab12cd"), [SEARCH, WEATHER], "auto", 200
    )
    assert plan.tool_call is not None
    args = json.loads(plan.tool_call.arguments)
    assert args["city"] == "Paris" and args["nonce"] == "ab12cd"
    assert isinstance(args["days"], int) and args["unit"] in ("c", "f")
    again = plan_chat(
        _user("weather please: get_weather city=Paris nonce=ab12cd"), [SEARCH, WEATHER], "auto", 200
    )
    assert again.tool_call == plan.tool_call


def test_tool_choice_none_gives_text_and_forced_function_is_used() -> None:
    assert plan_chat(_user("hi"), [WEATHER], "none", 5).tool_call is None
    forced = plan_chat(
        _user("hi"), [WEATHER, SEARCH], {"type": "function", "function": {"name": "search"}}, 5
    )
    assert forced.tool_call is not None and forced.tool_call.name == "search"


def test_pseudo_text_is_deterministic_and_has_max_tokens_pieces() -> None:
    a = plan_chat(_user("tell me a story"), None, "auto", 7)
    b = plan_chat(_user("tell me a story"), None, "auto", 7)
    c = plan_chat(_user("tell me another story"), None, "auto", 7)
    assert list(a.text_pieces) == list(b.text_pieces) and len(a.text_pieces) == 7
    assert list(a.text_pieces) != list(c.text_pieces)
    assert not a.natural_stop
    huge = plan_completion("x", 10_000_000)  # computed lazily
    assert len(huge.text_pieces) == 10_000_000 and huge.text_pieces[9_999_999]


def test_say_convention_stops_by_itself() -> None:
    plan = plan_completion("SAY hello there world", 100)
    assert "".join(plan.text_pieces) == "hello there world" and plan.natural_stop


def test_a_call_is_decoded_as_its_dsml_and_closes_with_one_call_token() -> None:
    plan = plan_chat(
        _user('CALL search {"query": " pd restart ", "nonce": "x1"}'), [SEARCH], "auto", 200
    )
    pieces = [plan.piece(i) for i in range(plan.token_count())]
    assert plan.tool_call is not None
    assert "".join(text for _, text in pieces) == plan.tool_call.markup
    assert plan.tool_call.markup.startswith('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="search">')
    calls = [text for kind, text in pieces if kind == "call"]
    assert len(calls) == 1 and {k for k, _ in pieces} == {"hidden", "call_part", "call"}
    # what the deepseekv4 parser makes of it: json.dumps of the stripped string parameters
    assert (
        isinstance(calls[0], CallEnd)
        and calls[0].arguments == '{"query": "pd restart", "nonce": "x1"}'
    )
    assert plan.finish_reason() == "tool_calls"


def test_without_a_tool_call_parser_the_dsml_is_content() -> None:
    plan = plan_chat(
        _user('CALL search {"query": "a"}'), [SEARCH], "auto", 200, ChatOptions(tool_parser=False)
    )
    pieces = [plan.piece(i) for i in range(plan.token_count())]
    assert {k for k, _ in pieces} == {"text"} and plan.finish_reason() == "stop"
    assert '<｜DSML｜invoke name="search">' in "".join(t for _, t in pieces)


def test_thinking_puts_reasoning_and_think_end_before_the_answer_within_max_tokens() -> None:
    opts = ChatOptions(reasoning_parser=True, thinking=True, reasoning_tokens=5)
    text = plan_chat(_user("tell me a story"), None, "auto", 20, opts)
    kinds = [text.piece(i)[0] for i in range(text.token_count())]
    assert kinds == ["reasoning"] * 5 + ["hidden"] + ["text"] * 14  # 20 in all
    assert text.piece(5)[1] == "</think>"
    unparsed = plan_chat(
        _user("tell me a story"),
        None,
        "auto",
        20,
        ChatOptions(reasoning_parser=False, thinking=True, reasoning_tokens=5),
    )
    assert {unparsed.piece(i)[0] for i in range(20)} == {"text"}  # no parser: all content
