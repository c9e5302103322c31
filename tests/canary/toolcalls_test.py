from __future__ import annotations

import pytest

from dsv4ops.canary import toolcalls as T
from dsv4ops.canary.toolcalls import assemble, check_calls, validate_schema
from dsv4ops.canary.workload import TOOL_SCHEMAS
from dsv4ops.jsontypes import JSONObject


def _d(
    index: int = 0, id: str | None = None, name: str | None = None, args: str | None = None
) -> JSONObject:
    fn: JSONObject = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    out: JSONObject = {"index": index, "function": fn}
    if id is not None:
        out["id"] = id
    return out


NONCE = "01234567"
GOOD = '{"nonce":"01234567","session":"s1","step":2}'


def _kinds(problems: list[T.ToolProblem]) -> list[str]:
    return [p.kind for p in problems]


def test_deltas_joined_by_index_validate() -> None:
    calls = assemble(
        [
            _d(0, "c0", "record_step", ""),
            _d(1, "c1", "lookup_order", ""),
            _d(0, args=GOOD[:10]),
            _d(1, args='{"nonce":"01234567",'),
            _d(0, args=GOOD[10:]),
            _d(1, args='"order_id":5}'),
        ]
    )
    assert [c.name for c in calls] == ["record_step", "lookup_order"]
    assert check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE) == []


def test_null_name_is_reported() -> None:  # sglang#23071's shape
    calls = assemble([_d(0, "c0", None, GOOD)])
    assert _kinds(check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE)) == [T.MISSING_NAME]


def test_duplicated_name_and_concatenated_arguments() -> None:
    calls = assemble([_d(0, "c0", "record_step", GOOD), _d(0, None, "record_step", GOOD)])
    kinds = _kinds(check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE))
    assert T.NAME_CHANGED in kinds and T.INVALID_JSON in kinds


def test_invalid_json_arguments() -> None:
    calls = assemble([_d(0, "c0", "record_step", GOOD[:20] + '",,')])
    assert _kinds(check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE)) == [T.INVALID_JSON]


def test_schema_violation() -> None:
    calls = assemble(
        [_d(0, "c0", "record_step", '{"nonce":"01234567","session":"s1","step":"two"}')]
    )
    problems = check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE)
    assert _kinds(problems) == [T.SCHEMA] and "step" in problems[0].detail


def test_cross_talk_is_told_apart_from_corruption() -> None:
    other = '{"nonce":"ffffffff","session":"s9","step":2}'
    calls = assemble([_d(0, "c0", "record_step", other)])
    assert _kinds(
        check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE, known_nonces={"ffffffff": "req-9"})
    ) == [T.CROSS_TALK]
    assert _kinds(check_calls(calls, TOOL_SCHEMAS, expected_nonce=NONCE)) == [T.NONCE_MISMATCH]


def test_missing_call_unknown_tool_and_markup() -> None:
    assert _kinds(check_calls([], TOOL_SCHEMAS, expected_nonce=NONCE)) == [T.MISSING_CALL]
    calls = assemble([_d(0, "c0", "rm_rf", "{}")])
    assert _kinds(check_calls(calls, TOOL_SCHEMAS, expected_nonce=None)) == [T.UNKNOWN_TOOL]
    leaked = check_calls(
        [],
        TOOL_SCHEMAS,
        expected_nonce=None,
        require_call=False,
        content='<｜tool▁calls▁begin｜>{"name": "x"}',
    )
    assert _kinds(leaked) == [T.MARKUP_IN_CONTENT]


def test_dsml_markup_in_content_is_caught() -> None:
    """DSV4's DSML exactly as SGLang's deepseekv4 detector spells it (U+FF5C bars)."""
    for leaked in (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="record_step">',
        "</｜DSML｜parameter>",
        'text <|DSML|invoke name="x">',
    ):
        problems = check_calls(
            [], TOOL_SCHEMAS, expected_nonce=None, require_call=False, content=leaked
        )
        assert _kinds(problems) == [T.MARKUP_IN_CONTENT], leaked
    assert not T.has_markup("a plain answer about DSML and | pipes")


def test_another_requests_nonce_in_any_argument_is_cross_talk() -> None:
    planted = '{"nonce":"01234567","session":"s1-ffffffff","step":2}'
    calls = assemble([_d(0, "c0", "record_step", planted)])
    problems = check_calls(
        calls,
        TOOL_SCHEMAS,
        expected_nonce=NONCE,
        known_nonces={"ffffffff": "req-9", NONCE: "req-1"},
    )
    assert _kinds(problems) == [T.CROSS_TALK] and "req-9" in problems[0].detail


def test_a_call_cut_by_max_tokens_is_not_a_missing_call() -> None:
    cut = check_calls([], TOOL_SCHEMAS, expected_nonce=NONCE, finish_reason="length")
    assert _kinds(cut) == [T.CUT_BY_MAX_TOKENS]
    dropped = check_calls([], TOOL_SCHEMAS, expected_nonce=NONCE, finish_reason="stop")
    assert _kinds(dropped) == [T.MISSING_CALL] and "'stop'" in dropped[0].detail


@pytest.mark.parametrize(
    ("value", "schema", "ok"),
    [
        (1, {"type": "integer"}, True),
        (True, {"type": "integer"}, False),
        (1.0, {"type": "integer"}, True),
        ("a", {"type": ["string", "null"]}, True),
        (None, {"type": ["string", "null"]}, True),
        ("x", {"enum": ["a", "b"]}, False),
        ("abc", {"type": "string", "pattern": "^a"}, True),
        ([1, "2"], {"type": "array", "items": {"type": "integer"}}, False),
        (
            {"a": 1, "b": 2},
            {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
            False,
        ),
        ({}, {"type": "object", "required": ["a"]}, False),
        (5, {"type": "number", "minimum": 6}, False),
    ],
)
def test_schema_subset(value: object, schema: JSONObject, ok: bool) -> None:
    assert (validate_schema(value, schema) == []) is ok


def test_schema_violations_name_the_path_and_the_rule() -> None:
    schema = {
        "type": "object",
        "required": ["nonce"],
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "array", "items": {"type": "integer"}},
        },
    }
    assert validate_schema({"city": 1, "days": [1, "2"], "x": 0}, schema) == [
        "$: 'nonce' is a required property",
        "$: Additional properties are not allowed ('x' was unexpected)",
        "$.city: 1 is not of type 'string'",
        "$.days[1]: '2' is not of type 'integer'",
    ]
