from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.probe import (
    TOOL_CALL_MAX_TOKENS,
    ProbeThinking,
    check_tool_call_reply,
    parse_chat_stream,
    run_probe,
)
from dsv4ops.orchestrate.workload import parse_load
from dsv4ops.remote.local import LocalExecutor
from dsv4ops.remote.supervisor import Supervisor
from dsv4ops.routerkind import RouterKind
from dsv4ops.settings import CanaryThresholds
from testing.clock import FakeClock
from testing.orchestrate import (
    STREAM_OK,
    TOOL_OK,
    FakeControl,
    RecordingControl,
    make_deployment,
    operator,
    with_recorded,
)
from testing.twin import twin_stack


def test_stream_parse_collects_text_and_done() -> None:
    text, finish, done, problem = parse_chat_stream(STREAM_OK)
    assert (text, finish, done, problem) == ("Hello there.", "stop", True, None)


def test_stream_without_text_or_with_error_fails() -> None:
    assert (parse_chat_stream('data: {"error": {"message": "x"}}\n\n')[3] or "").startswith(
        "error event"
    )
    text, _, done, _ = parse_chat_stream("data: [DONE]\n\n")
    assert text == "" and done


def test_reasoning_counts_as_generated_output() -> None:
    reasoning_only = (
        'data: {"choices":[{"delta":{"reasoning_content":"Let me think"}}]}\n\n'
        'data: {"choices":[{"delta":{"reasoning_content":null},'
        '"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    )
    text, finish, done, problem = parse_chat_stream(reasoning_only)
    assert (text, finish, done, problem) == ("Let me think", "length", True, None)


def test_tool_call_probe_leaves_room_for_reasoning_and_names_it_when_it_ran_out() -> None:
    control = RecordingControl()
    assert run_probe(control, "http://r").ok
    tool = next(b for b in control.sent if b.get("tools"))
    assert tool["max_tokens"] >= 512
    ran_out = json.dumps(
        {
            "choices": [
                {"message": {"content": "", "reasoning_content": "hmm"}, "finish_reason": "length"}
            ]
        }
    )
    assert "reasoning used all" in (check_tool_call_reply(ran_out) or "")


def test_tool_call_reply_checks_content_not_status() -> None:
    assert check_tool_call_reply(TOOL_OK) is None
    no_call = json.dumps({"choices": [{"message": {"content": "sunny"}}]})
    assert "no tool call" in (check_tool_call_reply(no_call) or "")
    bad_args = TOOL_OK.replace('{\\"city\\": \\"Paris\\"}', "{city")
    assert "not JSON" in (check_tool_call_reply(bad_args) or "")
    other = TOOL_OK.replace("get_weather", "rm_rf")
    assert "unknown tool" in (check_tool_call_reply(other) or "")


def test_probe_fails_when_generation_fails_even_if_health_would_pass() -> None:
    assert run_probe(FakeControl(), "http://r").ok
    result = run_probe(FakeControl(fail_probe=True), "http://r")
    assert not result.ok and len(result.checks) == 1 and result.checks[0].startswith("FAIL")
    assert "HTTP 504" in result.failures[0]


def test_parse_load_sums_ranks_with_prometheus_parser() -> None:
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{tp_rank="0"} 3\nsglang:num_running_reqs{tp_rank="1"} 2\n'
        "# TYPE sglang:num_queue_reqs gauge\n"
        'sglang:num_queue_reqs{tp_rank="0"} 1\n'
    )
    load = parse_load(text)
    assert (load.running, load.queued, load.busy) == (5.0, 1.0, True)
    assert parse_load("# TYPE other gauge\nother 1\n").running is None


def _probe_bodies(content: dict[str, Any] | None, tmp_path: Path) -> list[dict[str, Any]]:
    control = RecordingControl()
    journal = Journal("fake", directory=tmp_path, clock=FakeClock())
    out = operator(control, journal).deploy(with_recorded(make_deployment("d"), content=content))
    assert out.ok, out.message
    return [b for b in control.sent if "messages" in b]


def test_the_deploy_probe_asks_for_reasoning_as_the_profiles_canary_does(tmp_path: Path) -> None:
    """canary.thinking on: every probe request carries chat_template_kwargs.thinking (DSV4
    reasons only when asked) and the tool call gets thinking_budget_tokens more max_tokens."""
    canary = {"canary": {"thinking": True, "thinking_budget_tokens": 300}}
    bodies = _probe_bodies(canary, tmp_path / "on")
    assert len(bodies) == 4 and all(b["chat_template_kwargs"] == {"thinking": True} for b in bodies)
    tool = [b["max_tokens"] for b in bodies if b.get("tools")]
    assert tool == [TOOL_CALL_MAX_TOKENS + 300] * 2
    off = _probe_bodies({"canary": {"thinking": False}}, tmp_path / "off")
    assert off and not any("chat_template_kwargs" in b for b in off)
    assert not any("chat_template_kwargs" in b for b in _probe_bodies(None, tmp_path / "none"))


@pytest.mark.slow
@pytest.mark.router
def test_a_thinking_probe_through_the_real_router_gets_reasoning_before_the_call(
    tmp_path: Path,
) -> None:
    """The twin behind the real router reasons only when asked, for longer than the probe's
    own TOOL_CALL_MAX_TOKENS: the profile's budget is what lets the call still come."""
    decode = ["--tool-call-parser", "deepseekv4", "--reasoning-parser", "deepseek-v4"]
    env = {
        "DSV4_TWIN_TIME_SCALE": "0.02",
        "DSV4_TWIN_REASONING_TOKENS": "1100",
        "DSV4_TWIN_HAZARDS": "off",
    }
    control = Supervisor(LocalExecutor(), str(tmp_path / "target"), python=sys.executable)
    thinking = ProbeThinking.from_canary(
        CanaryThresholds(thinking=True, thinking_budget_tokens=200)
    )
    with twin_stack(router=True, env=env, decode_args=decode) as stack:
        assert stack.router is not None  # router=True started one
        asked = run_probe(control, stack.router.url, rounds=1, thinking=thinking)
        plain = run_probe(control, stack.router.url, rounds=1)
        short = run_probe(
            control, stack.router.url, rounds=1, thinking=replace(thinking, budget_tokens=0)
        )
    assert asked.ok, asked.checks
    assert "after" in asked.checks[1] and "chars of reasoning" in asked.checks[1]
    assert plain.ok and "reasoning" not in plain.checks[1]
    assert not short.ok and "reasoning used all 1024 max_tokens" in short.failures[0]


def test_the_probe_asks_for_the_tool_call_the_profile_declares_and_says_which(
    tmp_path: Path,
) -> None:
    """probe.tool_call: required forces the call (DSV4, the default and what journals without
    the setting ran), auto asks without the grammar, off sends none; the deploy's step detail
    says which, so a deploy that skipped the check never reads as one that passed it."""

    def deploy(mode: str | None) -> tuple[list[object], str]:
        control = RecordingControl()
        journal = Journal("fake", directory=tmp_path / str(mode), clock=FakeClock())
        content = {"probe": {"tool_call": mode}} if mode else None
        out = operator(control, journal).deploy(
            with_recorded(make_deployment("d"), content=content)
        )
        assert out.ok, out.message
        probe = next(
            s
            for s in journal.operations()[-1].steps
            if s.name.startswith("end-to-end probe") and s.phase == "done"
        )
        assert probe.detail is not None  # a done probe step says what it checked
        return [b.get("tool_choice") for b in control.sent if "messages" in b], probe.detail

    choices, detail = deploy(None)
    assert choices == [None, "required", None, "required"] and "tool" not in detail
    choices, detail = deploy("auto")
    assert choices == [None, "auto", None, "auto"]
    assert detail.endswith(
        "tool call asked with tool_choice auto, not forced (probe.tool_call: auto)"
    )
    choices, detail = deploy("off")
    assert choices == [None, None]
    assert detail == (
        "2 generations through the router, content checked; tool-call check "
        "skipped (profile probe.tool_call: off)"
    )
    with pytest.raises(ValueError, match="probe.tool_call"):
        run_probe(RecordingControl(), "http://r", tool_call="sometimes")


def test_behind_smg_the_probe_says_thinking_off_and_behind_0_3_2_sends_as_before(
    tmp_path: Path,
) -> None:
    """SMG 1.13.0 reads a DSV4 request without `thinking` as thinking on and refuses its forced
    tool call (400 tool_choice_not_supported; tests/cli/deploy_smg_test.py runs it for real):
    a deployment whose router.kind is smg says `thinking: false`; sglang-router's requests stay
    byte for byte what they were."""

    def sent(kind: str | None) -> list[object]:
        control = RecordingControl()
        journal = Journal("fake", directory=tmp_path / str(kind), clock=FakeClock())
        content = {"router": {"kind": kind}} if kind else None
        out = operator(control, journal).deploy(
            with_recorded(make_deployment("d"), content=content)
        )
        assert out.ok, out.message
        return [b.get("chat_template_kwargs") for b in control.sent if "messages" in b]

    assert sent("smg") == [{"thinking": False}] * 4
    assert sent("sglang-router") == sent(None) == [None] * 4
    # thinking on is asked for the same way behind either router
    on = ProbeThinking.from_canary(CanaryThresholds(thinking=True), RouterKind.SMG)
    assert on.apply({"max_tokens": 1}, extra_tokens=False)["chat_template_kwargs"] == {
        "thinking": True
    }
