"""The probe's judgement of replies, and what probe rounds become: corruption (the canary's
checks, this probe's nonce and exact arguments), stalls told apart from lost transfers by the
decode's progress, failures only "while healthy" when every health check is green."""

from __future__ import annotations

import json

from dsv4ops.remote.results import HttpReply
from dsv4ops.watch import Round, Watcher, WatchSettings
from dsv4ops.watch.probe import judge, probe_requests
from testing.clock import FakeClock
from testing.watch import ENDPOINTS, FakeUnit, sse


def _tool_reply(arguments: str, content: str = "") -> HttpReply:
    call = {
        "index": 0,
        "id": "c0",
        "type": "function",
        "function": {"name": "record_step", "arguments": arguments},
    }
    delta = {"tool_calls": [call], **({"content": content} if content else {})}
    return HttpReply(200, sse([{"delta": delta, "finish_reason": "tool_calls"}]), None, 0.2)


def test_judging_generations_and_tool_calls() -> None:
    gen, tool = probe_requests("default", 3)
    assert tool.expected_args == {"nonce": tool.nonce, "session": f"watch-{tool.nonce}", "step": 3}
    ok = judge(
        gen,
        HttpReply(200, sse([{"delta": {"content": "Hi."}, "finish_reason": "stop"}]), None, 0.1),
    )
    assert ok.status == "ok"
    assert judge(gen, HttpReply(None, "", "timed out", 2.0)).status == "stalled"
    assert judge(gen, HttpReply(200, 'data: {"choices": []}\n\n', None, 2.0)).status == "stalled"
    assert judge(gen, HttpReply(503, "no worker", None, 0.1)).status == "failed"
    err = judge(
        gen, HttpReply(200, 'data: {"error": {"message": "KV transfer failed"}}\n\n', None, 0)
    )
    assert err.status == "failed" and "KV transfer failed" in err.detail
    assert judge(tool, _tool_reply(json.dumps(tool.expected_args))).status == "ok"
    other = {**(tool.expected_args or {}), "session": "watch-01234567"}
    cross = judge(tool, _tool_reply(json.dumps(other)))
    assert cross.status == "corrupt" and "watch-01234567" in cross.detail
    assert judge(tool, _tool_reply('{"nonce": ')).status == "corrupt"  # invalid JSON
    markup = judge(
        tool,
        HttpReply(
            200,
            sse([{"delta": {"content": "<｜DSML｜invoke name=x>"}, "finish_reason": "stop"}]),
            None,
            0.1,
        ),
    )
    assert markup.status == "corrupt" and "markup" in markup.detail
    cut = judge(
        tool,
        HttpReply(
            200, sse([{"delta": {"reasoning_content": "hm"}, "finish_reason": "length"}]), None, 0.1
        ),
    )
    assert cut.status == "failed"  # reasoning used the budget: not corruption


def _probing(unit: FakeUnit, rounds: int, busy: bool) -> list[Round]:
    clock = FakeClock()
    w = Watcher(ENDPOINTS, WatchSettings(), unit, clock)
    out = []
    for _ in range(rounds):
        if busy:
            unit.decoding()
        out.append(w.tick())
        clock.advance(30.0)  # a probe round every tick
    return out


def test_corrupted_tool_calls_are_critical_with_the_evidence() -> None:
    for shape in ("corrupt", "markup"):
        unit = FakeUnit(probe=shape)
        r = _probing(unit, 1, busy=True)[0]
        f = next(f for f in r.findings if f.code == "tool_call_corruption")
        assert f.severity.name == "CRITICAL" and f.runbook == "tool-call-corruption"
        assert "tool_call probe" in f.evidence[0]


def test_stalls_with_a_frozen_decode_are_a_stall_with_a_progressing_one_lost_transfers() -> None:
    frozen = _probing(FakeUnit(probe="stall"), 2, busy=False)
    assert [{f.code for f in r.findings} for r in frozen] == [set(), {"probe_stalled"}]
    assert frozen[-1].findings[0].runbook == "decode-wedge"
    moving = _probing(FakeUnit(probe="stall"), 2, busy=True)
    f = next(f for f in moving[-1].findings)
    assert f.code == "pd_transfer_degraded" and "still moves" in f.evidence[-1]


def test_probe_failures_count_only_while_every_health_check_is_green() -> None:
    r = _probing(FakeUnit(probe="fail"), 1, busy=True)[0]
    assert {f.code for f in r.findings} == {"probe_failed_while_healthy"}
    unit = FakeUnit(probe="fail")
    unit.decode.health = 503
    assert not _probing(unit, 1, busy=True)[0].findings


def test_a_probe_the_router_refuses_for_its_key_is_said_as_such_not_a_pd_incident() -> None:
    """A wrong router API key (HTTP 401) was `probe_failed_while_healthy` -> the
    bootstrap-degradation runbook: a PD incident for a key mismatch on this machine. It is its
    own finding, on the router, not OK, whatever the health checks say."""
    for health in (200, 503):
        unit = FakeUnit(probe="unauthorized")
        unit.decode.health = health
        r = _probing(unit, 1, busy=True)[0]
        assert {f.code for f in r.findings} == {"probe_unauthorized"}, r.findings
        f = r.findings[0]
        assert (f.severity.name, f.component, f.runbook) == ("WARNING", "router", "router-change")
        assert "HTTP 401" in f.evidence[0] and "router.api_key" in f.evidence[1], f.evidence


def test_a_profile_without_tool_call_checks_gets_no_tool_probe() -> None:
    """canary.tool_calls false (the model cannot echo a nonce): the generation alone, so watch
    does not report the model's inability as corruption."""
    assert [r.kind for r in probe_requests("m", 1, tool_call=False)] == ["generation"]
    assert [r.kind for r in probe_requests("m", 1)] == ["generation", "tool_call"]
