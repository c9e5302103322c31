from __future__ import annotations

import json

from dsv4ops.orchestrate.probe import check_tool_call_reply, parse_chat_stream, run_probe
from dsv4ops.orchestrate.workload import parse_load
from testing.orchestrate_fake_control import STREAM_OK, TOOL_OK, FakeControl, RecordingControl


def test_stream_parse_collects_text_and_done():
    text, finish, done, problem = parse_chat_stream(STREAM_OK)
    assert (text, finish, done, problem) == ("Hello there.", "stop", True, None)


def test_stream_without_text_or_with_error_fails():
    assert parse_chat_stream('data: {"error": {"message": "x"}}\n\n')[3].startswith("error event")
    text, _, done, _ = parse_chat_stream("data: [DONE]\n\n")
    assert text == "" and done


def test_reasoning_counts_as_generated_output():
    reasoning_only = ('data: {"choices":[{"delta":{"reasoning_content":"Let me think"}}]}\n\n'
                      'data: {"choices":[{"delta":{"reasoning_content":null},'
                      '"finish_reason":"length"}]}\n\ndata: [DONE]\n\n')
    text, finish, done, problem = parse_chat_stream(reasoning_only)
    assert (text, finish, done, problem) == ("Let me think", "length", True, None)


def test_tool_call_probe_leaves_room_for_reasoning_and_names_it_when_it_ran_out():
    control = RecordingControl()
    assert run_probe(control, "http://r").ok
    tool = next(b for b in control.sent if b.get("tools"))
    assert tool["max_tokens"] >= 512
    ran_out = json.dumps({"choices": [{"message": {"content": "", "reasoning_content": "hmm"},
                                       "finish_reason": "length"}]})
    assert "reasoning used all" in check_tool_call_reply(ran_out)


def test_tool_call_reply_checks_content_not_status():
    assert check_tool_call_reply(TOOL_OK) is None
    no_call = json.dumps({"choices": [{"message": {"content": "sunny"}}]})
    assert "no tool call" in check_tool_call_reply(no_call)
    bad_args = TOOL_OK.replace('{\\"city\\": \\"Paris\\"}', "{city")
    assert "not JSON" in check_tool_call_reply(bad_args)
    other = TOOL_OK.replace("get_weather", "rm_rf")
    assert "unknown tool" in check_tool_call_reply(other)


def test_probe_fails_when_generation_fails_even_if_health_would_pass():
    assert run_probe(FakeControl(), "http://r").ok
    result = run_probe(FakeControl(fail_probe=True), "http://r")
    assert not result.ok and len(result.checks) == 1 and result.checks[0].startswith("FAIL")
    assert "HTTP 504" in result.failures[0]


def test_parse_load_sums_ranks_with_prometheus_parser():
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{tp_rank="0"} 3\nsglang:num_running_reqs{tp_rank="1"} 2\n'
        "# TYPE sglang:num_queue_reqs gauge\n"
        'sglang:num_queue_reqs{tp_rank="0"} 1\n'
    )
    load = parse_load(text)
    assert (load.running, load.queued, load.busy) == (5.0, 1.0, True)
    assert parse_load("# TYPE other gauge\nother 1\n").running is None
