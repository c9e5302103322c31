"""The twin's recipe stream (twin/recipe.py) piece for piece against what SGLang 0.5.23's own
deepseek-recipe output parser streamed of the same stand-in tokens (recorded offline from the
pinned wheel by tools/sglang-cpu/recipe_stream_shape.py: a session call, parallel calls with an
array value, nested arrays and a string with quotes and a backslash, a string with spaces around
it, streamed as written where the detector strips it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv4ops.jsontypes import JSONObject
from dsv4ops.twin import dsml
from dsv4ops.twin.content import ChatOptions, Plan, plan_chat
from dsv4ops.twin.corruption import corrupt_plan
from dsv4ops.twin.formats import ChatFormat, Job
from dsv4ops.twin.recipe import stream_pieces

OBSERVED = (
    Path(__file__).resolve().parents[2]
    / "tools"
    / "sglang-cpu"
    / "observed"
    / "recipe-stream-twin-tokens.json"
)


def test_the_pieces_are_those_sglangs_recipe_parser_streamed() -> None:
    recorded = json.loads(OBSERVED.read_text(encoding="utf-8"))
    assert recorded["sglang"] == "0.5.23" and len(recorded["examples"]) == 4
    for example in recorded["examples"]:
        calls = [(name, args) for name, args in example["calls"]]
        toks = dsml.tokens(dsml.render_calls(calls))
        assert toks == [s["token"] for s in example["steps"]]
        ours = [[[p.index, p.name, p.arguments] for p in step] for step in stream_pieces(toks)]
        assert ours == [s["pieces"] for s in example["steps"]]


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
            st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), _VALUES, max_size=4),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_the_joined_pieces_of_each_call_are_its_arguments(
    calls: list[tuple[str, dict[str, object]]],
) -> None:
    # string values without surrounding whitespace or DSML (the parser strips and splits on it)
    calls = [
        (n, {k: v.strip() if isinstance(v, str) else v for k, v in a.items()}) for n, a in calls
    ]
    toks = dsml.tokens(dsml.render_calls(calls))
    assert "".join(toks) == dsml.render_calls(calls)
    steps = stream_pieces(toks)
    for index, (name, args) in enumerate(calls):
        mine = [p for step in steps for p in step if p.index == index]
        assert mine[0].name == name and mine[0].arguments == ""
        assert all(p.name is None for p in mine[1:])
        assert "".join(p.arguments for p in mine) == dsml.parsed_arguments(args)


SERVED = OBSERVED.with_name("served-recipe-stream.txt")


def _shape(value: object) -> object:
    """Keys in order, values replaced by their type (the ids, texts and times differ)."""
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def test_the_twins_call_chunks_have_the_shape_the_real_server_served() -> None:
    # the real 0.5.23 on CPU behind router 0.3.2, deepseekv4 through deepseek-recipe
    served = [
        json.loads(line[len("data: ") :])
        for line in SERVED.read_text(encoding="utf-8").splitlines()
        if line.startswith("data: {")
    ]
    calls = [c for c in served if "tool_calls" in c["choices"][0]["delta"]]
    pieces = [c["choices"][0]["delta"]["tool_calls"][0] for c in calls]
    for index in {p["index"] for p in pieces}:  # each call: a header, then its arguments
        header, *rest = [p for p in pieces if p["index"] == index]
        assert header["id"].startswith("call_") and header["function"]["arguments"] == ""
        assert all(p["id"] is None and p["function"]["name"] is None for p in rest)
    job = Job("chat", "rid", "m", True, False, 3, 100, 1, tool_parsing=True, recipe=True)
    fmt = ChatFormat(job)
    head = dsml.CallPiece(0, "get_weather", "")
    part = dsml.CallPiece(0, None, "{")
    twin = [json.loads(c[len(b"data: ") :]) for c in fmt._pieces((head, part)).split(b"\n\n") if c]
    assert [_shape(c) for c in twin] == [_shape(calls[0]), _shape(calls[1])]


WHOLE = OBSERVED.with_name("recipe-whole-twin-tokens.json")
_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("search", "record_step", "lookup_order", "get_weather", "ping")
]


def _plan(calls: list[list[object]], recipe: bool, shape: str | None = None) -> Plan:
    asked = " ".join(f"CALL {n} {json.dumps(a)}" for n, a in calls)
    options = ChatOptions(recipe=recipe)
    plan = plan_chat([{"role": "user", "content": asked}], _TOOLS, "auto", 500, options)
    if shape is not None:
        assert corrupt_plan(plan, None, 0, [shape]) == shape
    return plan


def _served(plan: Plan, recipe: bool) -> tuple[list[list[object]], JSONObject]:
    """What the twin sends of `plan`: each call piece streamed ([index, name, arguments]), and
    the whole (stream=false) answer."""
    job = Job("chat", "rid", "m", True, False, 3, 500, 1, tool_parsing=True, recipe=recipe)
    pieces = [plan.piece(i) for i in range(plan.token_count())]
    fmt = ChatFormat(job)
    chunks = b"".join(fmt.token(p) for p in pieces).split(b"\n\n")
    streamed = []
    for chunk in (json.loads(c[len(b"data: ") :]) for c in chunks if c):
        assert chunk["choices"][0]["delta"].get("content") is None  # no DSML as text
        for call in chunk["choices"][0]["delta"].get("tool_calls", []):
            streamed.append(
                [call["index"], call["function"]["name"], call["function"]["arguments"]]
            )
    return streamed, ChatFormat(job).full(pieces, plan.finish_reason())


def _whole(answer: JSONObject) -> dict[str, object]:
    choice = answer["choices"][0]
    message = choice["message"]
    calls = [
        [c["index"], c["function"]["name"], c["function"]["arguments"]]
        for c in message.get("tool_calls", [])
    ]
    return {"content": message["content"], "tool_calls": calls, "finish": choice["finish_reason"]}


def test_through_the_recipe_the_twin_answers_what_the_recipe_made_of_the_same_dsml() -> None:
    # deepseekv4: a string value as written (stream and whole answer), and the twin's malformed
    # invoke (the dropped_call corruption shape) streamed as decoded, arguments not JSON, finish
    # "tool_calls", as SGLang 0.5.23's recipe parser gave them (recipe_whole_shape.py)
    recorded = json.loads(WHOLE.read_text(encoding="utf-8"))
    assert recorded["deepseek_recipe"] == "0.2.0" and len(recorded["examples"]) == 4
    for example in recorded["examples"]:
        malformed = example["kind"] == "malformed"
        plan = _plan(example["calls"], True, "dropped_call" if malformed else None)
        assert plan.tool_call is not None and plan.tool_call.markup == example["markup"]
        streamed, whole = _served(plan, True)
        assert streamed == [p for step in example["steps"] for p in step["pieces"]]
        real = example["whole"]
        assert _whole(whole) == {
            "content": real["content"],
            "tool_calls": real["tool_calls"],
            "finish": real["finish_reason"],
        }
        if malformed:  # what the canary's corruption judge must catch
            with pytest.raises(ValueError):
                json.loads(real["tool_calls"][0][2])


def test_a_detector_strips_string_values_and_drops_a_malformed_invoke() -> None:
    # any other parser (the detector's rules): stripped, and the malformed invoke is dropped
    calls: list[list[object]] = [["search", {"query": " pd restart ", "nonce": "x1"}]]
    streamed, whole = _served(_plan(calls, False), False)
    stripped = '{"query": "pd restart", "nonce": "x1"}'
    assert streamed == [[0, "search", stripped]]
    assert _whole(whole) == {
        "content": "",
        "tool_calls": [[0, "search", stripped]],
        "finish": "tool_calls",
    }
    streamed, whole = _served(_plan(calls, False, "dropped_call"), False)
    assert streamed == [] and _whole(whole) == {"content": "", "tool_calls": [], "finish": "stop"}
