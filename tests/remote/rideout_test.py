"""Riding out a lost connection: what is sent again, with what, for how long, and what the
operator hears; the last part through the real agent with a transport that drops on cue."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dsv4ops.errors import ConnectionLostError
from dsv4ops.jsontypes import JSONObject, JSONValue
from dsv4ops.remote import ProcessSpec, Supervisor
from dsv4ops.remote.base import CommandResult
from dsv4ops.remote.errors import AgentCallError, ComponentNotReadyError
from dsv4ops.remote.local import LocalExecutor
from dsv4ops.remote.rideout import Outage, call, resend
from testing.clock import FakeClock
from testing.ports import free_ports
from testing.remote import toy_argv


def lost(sent: bool) -> ConnectionLostError:
    return ConnectionLostError("box: connection dropped during `python3`", sent=sent)


# ------------------------------------------------------------------ what is sent again


@pytest.mark.parametrize("op", ["start", "stop", "kill", "lock_acquire", "kernels_install"])
def test_a_change_that_may_have_run_is_never_sent_again(op: str) -> None:
    assert resend(op, {"name": "decode"}, 60, sent=True, spent_s=1) is None
    # ... and one that certainly did not reach the target is
    assert resend(op, {"name": "decode"}, 60, sent=False, spent_s=1) == ({"name": "decode"}, 60)


@pytest.mark.parametrize("op", ["status", "log_tail", "journal_read", "lock_info", "hello"])
def test_a_read_is_sent_again_as_it_was(op: str) -> None:
    assert resend(op, {"names": ["a"]}, 60, sent=True, spent_s=5) == ({"names": ["a"]}, 60)


def test_http_is_sent_again_only_when_it_changes_nothing() -> None:
    get = {"url": "http://x/health", "method": "GET"}
    assert resend("http", get, 40, sent=True, spent_s=1) == (get, 40)
    assert resend("http", {"url": "http://x/health"}, 40, sent=True, spent_s=1) is not None
    post = {"url": "http://x/generate", "method": "POST", "body": "{}"}
    assert resend("http", post, 40, sent=True, spent_s=1) is None
    mixed = {"requests": [{"url": "http://x/a"}, {"url": "http://x/flush_cache", "method": "post"}]}
    assert resend("http_many", mixed, 40, sent=True, spent_s=1) is None
    reads = {"requests": [{"url": "http://x/a"}, {"url": "http://x/b", "method": "head"}]}
    assert resend("http_many", reads, 40, sent=True, spent_s=1) == (reads, 40)


def test_a_wait_keeps_its_own_deadline_then_takes_one_last_look() -> None:
    args: JSONObject = {"url": "http://x/health", "timeout_s": 30, "name": "decode"}
    again = resend("wait_http", args, 60, sent=True, spent_s=12.5)
    assert again == ({"url": "http://x/health", "timeout_s": 17.5, "name": "decode"}, 47.5)
    assert args["timeout_s"] == 30  # the caller's arguments are left as they were
    # past its deadline: a short look, so the caller hears ready or timed out, not the outage
    assert resend("wait_http", args, 60, sent=True, spent_s=31) == (
        {**args, "timeout_s": 0.5},
        30.5,
    )


def test_a_journal_append_is_sent_again_marked_again() -> None:
    args: JSONObject = {"lines": '{"op":"d-1","seq":3}\n', "offset": 10}
    again = resend("journal_append", args, 60, sent=True, spent_s=1)
    assert again is not None and again[0] == {**args, "again": True}
    assert "again" not in args


# ------------------------------------------------------------------ the outage


def test_the_budget_is_one_deadline_with_quick_first_pauses() -> None:
    clock, heard = FakeClock(), list[str]()
    outage = Outage("box", 5.0, clock, heard.append)
    begin = clock.monotonic()
    times = []
    with pytest.raises(ConnectionLostError) as raised:
        while True:
            outage.pause(lost(True))
            times.append(round(clock.monotonic() - begin, 2))
    assert times == [0.2, 0.7, 1.7, 3.7, 5.0]  # the last pause stops at the deadline
    assert "more than ssh.reconnect_s = 5 s" in str(raised.value)
    assert raised.value.sent is True and raised.value.hint
    assert len(heard) == 1 and "connection lost" in heard[0] and "up to 5 s" in heard[0]


def test_a_budget_of_zero_fails_as_before() -> None:
    clock, heard = FakeClock(), list[str]()
    exc = lost(False)
    with pytest.raises(ConnectionLostError) as raised:
        Outage("box", 0.0, clock, heard.append).pause(exc)
    assert raised.value is exc and heard == [] and clock.monotonic() == 1000.0


def test_the_operator_hears_when_it_is_back_and_a_new_outage_has_its_own_budget() -> None:
    clock, heard = FakeClock(), list[str]()
    outage = Outage("box", 3.0, clock, heard.append)
    outage.over()
    assert heard == []  # no outage, nothing to say
    outage.pause(lost(True))
    outage.pause(lost(True))
    outage.over()
    assert heard[-1] == "box: connection is back after 0.7 s"
    for _ in range(4):  # a fresh 3 s: 0.2 + 0.5 + 1 + 1.3
        outage.pause(lost(True))
    with pytest.raises(ConnectionLostError):
        outage.pause(lost(True))


# ------------------------------------------------------------------ the call loop


class Flaky:
    """`once` for rideout.call: raises the given errors in turn, then answers."""

    def __init__(self, clock: FakeClock, errors: Sequence[BaseException], cost_s: float) -> None:
        self.clock, self.errors, self.cost_s = clock, list(errors), cost_s
        self.sent: list[tuple[float, dict[str, JSONValue]]] = []

    def __call__(self, op: str, timeout: float, args: Mapping[str, JSONValue]) -> JSONObject:
        self.sent.append((timeout, dict(args)))
        self.clock.advance(self.cost_s)
        if self.errors:
            raise self.errors.pop(0)
        return {"op": op}


def test_a_wait_is_sent_again_with_what_is_left_and_reports_what_it_spent() -> None:
    clock = FakeClock()
    once = Flaky(clock, [lost(True), lost(False)], cost_s=1.0)
    outage = Outage("box", 30.0, clock)
    args: JSONObject = {"url": "u", "timeout_s": 20}
    result, spent = call("wait_http", args, 50, once, outage, clock)
    assert result == {"op": "wait_http"}
    # 1 s lost + 0.2 s pause; then 1 s lost + 0.5 s pause
    assert spent == pytest.approx(2.7)
    assert [round(float(a["timeout_s"]), 2) for _, a in once.sent] == [20, 18.8, 17.3]
    assert [round(t, 2) for t, _ in once.sent] == [50, 48.8, 47.3]


def test_a_start_that_may_have_run_raises_at_once() -> None:
    clock = FakeClock()
    once = Flaky(clock, [lost(True)], cost_s=0.5)
    with pytest.raises(ConnectionLostError):
        call("start", {"name": "decode"}, 60, once, Outage("box", 30, clock), clock)
    assert len(once.sent) == 1 and clock.monotonic() == 1000.5  # no pause, no second try


def test_an_agent_refusal_ends_the_outage_and_carries_the_time_it_took() -> None:
    clock, heard = FakeClock(), list[str]()
    refusal = AgentCallError("box: wait_http: timeout", kind="timeout", reply={"elapsed_s": 4})
    once = Flaky(clock, [lost(True), refusal], cost_s=1.0)
    with pytest.raises(AgentCallError) as raised:
        call("wait_http", {"timeout_s": 5}, 35, once, Outage("box", 30, clock, heard.append), clock)
    assert raised.value.waited_before_s == pytest.approx(1.2)
    assert heard[-1] == "box: connection is back after 1.2 s"


# ------------------------------------------------------------------ through the real agent


class DroppingExecutor(LocalExecutor):
    """A local target whose connection drops on cue: `drops` maps an agent op to how many of
    its calls are lost, each `after` it ran (sent) or `before` (never sent)."""

    def __init__(self, drops: dict[str, list[str]]) -> None:
        super().__init__()
        self.drops = drops
        self.ran: list[str] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> CommandResult:
        op = str(json.loads(stdin)["op"]) if stdin and stdin.startswith("{") else ""
        when = self.drops.get(op, [])
        if when and when[0] == "before":
            when.pop(0)
            raise ConnectionLostError(f"box: connection dropped before `{op}`", sent=False)
        result = super().run(argv, timeout=timeout, check=check, env=env, cwd=cwd, stdin=stdin)
        self.ran.append(op)
        if when:
            when.pop(0)
            raise ConnectionLostError(f"box: connection dropped during `{op}`", sent=True)
        return result


def _sup(
    workdir: Path, drops: dict[str, list[str]], reconnect_s: float = 30
) -> tuple[Supervisor, DroppingExecutor, FakeClock, list[str]]:
    ex, clock, heard = DroppingExecutor(drops), FakeClock(), list[str]()
    sup = Supervisor(
        ex, str(workdir), python=sys.executable, reconnect_s=reconnect_s, clock=clock,
        notify=heard.append,
    )  # fmt: skip
    sup.ensure_agent()
    return sup, ex, clock, heard


def test_reads_ride_out_a_drop_and_a_start_is_sent_only_when_it_never_left(workdir: Path) -> None:
    sup, ex, clock, heard = _sup(workdir, {"status": ["after"], "start": ["before"]})
    (port,) = free_ports(1)
    spec = ProcessSpec("web", toy_argv("--port", port), {}, (port,))
    state = sup.start(spec)
    assert ex.ran.count("start") == 1 and state.alive
    assert sup.status(["web"])["web"].pid == state.pid
    assert ex.ran.count("status") == 2  # the first answer was lost with the connection
    assert sum("connection lost" in h for h in heard) == 2, heard
    assert sum("connection is back" in h for h in heard) == 2, heard
    assert clock.monotonic() > 1000  # it paused before each resend
    sup.stop("web", grace_s=5)


def test_a_start_lost_after_it_ran_is_reported_not_repeated(workdir: Path) -> None:
    sup, ex, _, _ = _sup(workdir, {"start": ["after"]})
    (port,) = free_ports(1)
    with pytest.raises(ConnectionLostError, match="dropped during `start`"):
        sup.start(ProcessSpec("web", toy_argv("--port", port), {}, (port,)))
    assert ex.ran.count("start") == 1
    assert sup.status(["web"])["web"].alive  # it did start: status is where the operator sees it
    sup.stop("web", grace_s=5)


def _append(sup: Supervisor, lines: str, offset: int) -> None:
    sup.call("journal_append", lines=lines, offset=offset, prefix_window=None)


def test_a_journal_append_that_landed_is_not_appended_twice(workdir: Path) -> None:
    # Lost after it landed, then lost again before the resend left: still marked `again`.
    sup, ex, _, _ = _sup(workdir, {"journal_append": ["after", "before"]})
    line = '{"op":"d-1","seq":1,"type":"begin"}\n'
    _append(sup, line, 0)
    assert ex.ran.count("journal_append") == 2  # sent again after the lost answer
    assert (workdir / "journal.jsonl").read_text() == line
    # The same lines appended on purpose (no drop) are appended: only a resend is checked.
    _append(sup, line, len(line))
    assert (workdir / "journal.jsonl").read_text() == line * 2


def test_a_journal_append_lost_before_it_landed_lands_once(workdir: Path) -> None:
    sup, ex, _, _ = _sup(workdir, {"journal_append": ["before"]})
    line = '{"op":"d-2","seq":1,"type":"begin"}\n'
    _append(sup, line, 0)
    assert (workdir / "journal.jsonl").read_text() == line


def test_a_wait_rides_out_a_drop_within_its_own_deadline(workdir: Path) -> None:
    sup, ex, clock, heard = _sup(workdir, {"wait_http": ["after"]})
    (port,) = free_ports(1)
    ready = workdir.parent / "ready"
    sup.start(ProcessSpec("web", toy_argv("--port", port, "--ready-file", ready), {}, (port,)))
    ready.touch()
    t0 = clock.monotonic()
    res = sup.wait_http_result(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    assert ex.ran.count("wait_http") == 2
    paused = clock.monotonic() - t0  # a fake clock: only the pause before the resend moved it
    assert paused == pytest.approx(0.2)
    assert res.elapsed_s >= paused  # the agent's own wait, plus the pause
    assert heard[-1].startswith(f"{ex.host}: connection is back")
    sup.stop("web", grace_s=5)


def test_a_wait_whose_budget_is_spent_says_so(workdir: Path) -> None:
    sup, _, _, _ = _sup(workdir, {"wait_http": ["after", "before", "before"]}, reconnect_s=0.5)
    (port,) = free_ports(1)
    sup.start(ProcessSpec("web", toy_argv("--port", port), {}, (port,)))
    with pytest.raises(ConnectionLostError, match="more than ssh.reconnect_s = 0.5 s"):
        sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=20, proc_name="web")
    sup.stop("web", grace_s=5)


def test_a_wait_slice_spent_in_an_outage_answers_timed_out(workdir: Path) -> None:
    """A deploy waits in 3 s slices: a slice that an outage outlasted must end as a slice
    does (not ready yet), so the next slice is sent, not as a failed deploy."""
    sup, ex, clock, _ = _sup(workdir, {"wait_http": ["after", "before", "before"]})
    (port,) = free_ports(1)
    never = workdir.parent / "never"
    sup.start(ProcessSpec("web", toy_argv("--port", port, "--ready-file", never), {}, (port,)))
    clock_before = clock.monotonic()
    with pytest.raises(ComponentNotReadyError) as raised:
        sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=1.0, proc_name="web")
    assert raised.value.reason == "timeout" and ex.ran.count("wait_http") == 2
    assert clock.monotonic() - clock_before == pytest.approx(1.7)  # 0.2 + 0.5 + 1.0 paused
    assert raised.value.elapsed_s >= 1.7 + 0.5  # the pauses and the last look
    sup.stop("web", grace_s=5)


def test_a_wait_that_times_out_after_an_outage_counts_it(workdir: Path) -> None:
    sup, _, clock, _ = _sup(workdir, {"wait_http": ["before"]})
    (port,) = free_ports(1)
    ready = workdir.parent / "never"
    sup.start(ProcessSpec("web", toy_argv("--port", port, "--ready-file", ready), {}, (port,)))
    with pytest.raises(ComponentNotReadyError) as raised:
        sup.wait_http(f"http://127.0.0.1:{port}/", timeout_s=1.2, proc_name="web")
    # the agent waited what was left (1.0 s of the 1.2 s); the 0.2 s pause counts too
    assert raised.value.elapsed_s >= 1.2
    sup.stop("web", grace_s=5)
