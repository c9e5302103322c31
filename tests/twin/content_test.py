from __future__ import annotations

import json

from dsv4ops.twin.content import corrupt_plan, plan_chat, plan_completion

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}, "nonce": {"type": "string"},
                                  "days": {"type": "integer"},
                                  "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city", "nonce", "days", "unit"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "parameters": {"type": "object",
                                     "properties": {"query": {"type": "string"}}}}}


def _user(text):
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def test_call_convention_gives_exactly_the_given_arguments():
    plan = plan_chat(_user('CALL search {"query": "pd restart", "nonce": "x1"}'),
                     [WEATHER, SEARCH], "auto", 200)
    assert plan.tool_call is not None and plan.tool_call.name == "search"
    assert json.loads(plan.tool_call.arguments) == {"query": "pd restart", "nonce": "x1"}


def test_named_values_fill_the_schema_and_the_rest_is_generated_deterministically():
    plan = plan_chat(_user("weather please: get_weather city=Paris nonce=ab12cd"),
                     [SEARCH, WEATHER], "auto", 200)
    args = json.loads(plan.tool_call.arguments)
    assert args["city"] == "Paris" and args["nonce"] == "ab12cd"
    assert isinstance(args["days"], int) and args["unit"] in ("c", "f")
    again = plan_chat(_user("weather please: get_weather city=Paris nonce=ab12cd"),
                      [SEARCH, WEATHER], "auto", 200)
    assert again.tool_call == plan.tool_call


def test_tool_choice_none_gives_text_and_forced_function_is_used():
    assert plan_chat(_user("hi"), [WEATHER], "none", 5).tool_call is None
    forced = plan_chat(_user("hi"), [WEATHER, SEARCH],
                       {"type": "function", "function": {"name": "search"}}, 5)
    assert forced.tool_call.name == "search"


def test_pseudo_text_is_deterministic_and_has_max_tokens_pieces():
    a = plan_chat(_user("tell me a story"), None, "auto", 7)
    b = plan_chat(_user("tell me a story"), None, "auto", 7)
    c = plan_chat(_user("tell me another story"), None, "auto", 7)
    assert list(a.text_pieces) == list(b.text_pieces) and len(a.text_pieces) == 7
    assert list(a.text_pieces) != list(c.text_pieces)
    assert not a.natural_stop
    huge = plan_completion("x", 10_000_000)  # computed lazily
    assert len(huge.text_pieces) == 10_000_000 and huge.text_pieces[9_999_999]


def test_say_convention_stops_by_itself():
    plan = plan_completion("SAY hello there world", 100)
    assert "".join(plan.text_pieces) == "hello there world" and plan.natural_stop


def test_corruption_swaps_arguments_across_requests_or_breaks_json():
    mine = plan_chat(_user('CALL search {"query": "a", "nonce": "n1"}'), [SEARCH], "auto", 99)
    other = plan_chat(_user('CALL search {"query": "b", "nonce": "n2"}'), [SEARCH], "auto", 99)
    assert corrupt_plan(mine, other, 0) == "tool_args_cross_request"
    assert json.loads(mine.tool_call.arguments)["nonce"] == "n2"
    lone = plan_chat(_user('CALL search {"query": "a", "nonce": "n1"}'), [SEARCH], "auto", 99)
    assert corrupt_plan(lone, None, 0) == "tool_args_invalid_json"
    try:
        json.loads(lone.tool_call.arguments)
        raise AssertionError("arguments should not parse")
    except ValueError:
        pass
    text = plan_chat(_user("story"), None, "auto", 9)
    clean = list(text.text_pieces)
    assert corrupt_plan(text, None, 1) == "garbled_text"
    assert list(text.text_pieces) != clean and any("\ufffd" in p for p in text.text_pieces)
