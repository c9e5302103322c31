"""The agent's wire (dsv4ops/remote/wire.py): a reply is used only when it answers its request
(by id, shape and keys). A stray line on the agent's stdout, or garbage on its stdin, is that
call's transport failure: never a KeyError (exit 3), never another call's answer, and the calls
after it are answered by their own replies (a deploy's rollback and lock release included,
tests/orchestrate/agent_wire_faults_test.py)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops.errors import DsOpsError
from dsv4ops.remote import AgentCallError, Executor, LocalExecutor, ProcessSpec, Supervisor, wire
from dsv4ops.remote.agent import main as agent_main
from testing.ports import free_ports
from testing.remote import (
    REQUEST_ID,
    FakeAgentExecutor,
    OneShotLocalExecutor,
    tamper_once,
    tampering_python,
)

RID = "req-1"
_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_RESULT_KEYS = sorted(
    {k for keys in wire.RESULT_KEYS.values() for k in keys} | {"holder", "stale", "broke", "value"}
)
_KINDS = st.sampled_from(["stale_agent", "timeout", "died", "lock_held", "internal", "transport"])
# Reply-shaped objects, right and wrong: each key present or not, of the right type or not.
_REPLIES = st.fixed_dictionaries(
    {},
    optional={
        "ok": st.booleans() | _VALUES,
        "id": st.just(REQUEST_ID) | st.just("another-request") | _VALUES,
        "result": st.dictionaries(st.sampled_from(_RESULT_KEYS), _VALUES, max_size=8) | _VALUES,
        "kind": _KINDS | _VALUES,
        "error": _VALUES,
        "holder": _VALUES,
        "stale": _VALUES,
        "elapsed_s": _VALUES,
        "log_tail": _VALUES,
    },
)
# What a line on the agent's stdout can be: text, JSON of any shape, something like a reply.
LINES = st.text(max_size=40) | _VALUES.map(json.dumps) | _REPLIES.map(json.dumps)
_OPS = st.sampled_from([*sorted(wire.RESULT_KEYS), "lock_info", "status", "journal_read"])
_PROPERTY = settings(
    derandomize=True,
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_PROPERTY
@given(line=LINES, op=_OPS, older_agent=st.booleans())
def test_decoding_any_line_gives_its_answer_or_a_transport_error(
    line: str, op: str, older_agent: bool
) -> None:
    text = line.replace(REQUEST_ID, RID)
    try:
        got = wire.decode(text, op=op, request_id=RID, host="box", older_agent=older_agent)
    except AgentCallError as exc:
        assert exc.kind == "transport" and str(exc).startswith(f"box: agent {op} failed")
        return
    reply = json.loads(text)
    if isinstance(got, wire.Refusal):
        older_stale = older_agent and got.kind == "stale_agent" and "id" not in reply
        assert reply["ok"] is False and (reply.get("id") == RID or older_stale)
    else:
        assert reply["ok"] is True and reply["id"] == RID
        result = reply["result"]
        assert got == (result if isinstance(result, dict) else {"value": result})
        if isinstance(result, dict):
            assert wire.RESULT_KEYS.get(op, frozenset()) <= got.keys()


@_PROPERTY
@given(reply=_REPLIES, other=st.text(max_size=12) | st.integers(), op=_OPS)
def test_a_reply_to_another_request_is_never_taken(
    reply: dict[str, object], other: object, op: str
) -> None:
    if other == RID:
        return
    text = json.dumps({**reply, "id": other})
    with pytest.raises(AgentCallError) as caught:
        wire.decode(text, op=op, request_id=RID, host="box", older_agent=True)
    assert caught.value.kind == "transport"


def _method_calls(sup: Supervisor) -> list[Callable[[], object]]:
    """Every typed Supervisor method, each reading its own reply."""
    return [
        lambda: sup.wait_http_result("http://127.0.0.1:9/", timeout_s=1, proc_name="decode"),
        lambda: sup.lock_release("op-1"),
        lambda: sup.lock_acquire({"pid": 1, "op_id": "op-1"}),
        lambda: sup.lock_info(),
        lambda: sup.status(["decode"]),
        lambda: sup.stop("decode", grace_s=1),
        lambda: sup.start(ProcessSpec("decode", ("/bin/true",))),
        lambda: sup.http("http://127.0.0.1:9/"),
        lambda: sup.http_many(["http://127.0.0.1:9/"]),
        lambda: sup.preflight([30000], [0]),
        lambda: sup.read_state("x"),
        lambda: sup.kill("decode"),
        lambda: sup.log_tail("decode"),
        lambda: sup.ensure_agent(),
    ]


@settings(derandomize=True, max_examples=150, deadline=None)
@given(line=LINES, which=st.integers(min_value=0, max_value=13))
def test_whatever_the_agent_prints_a_supervisor_call_fails_only_as_an_explained_error(
    line: str, which: int
) -> None:
    """Never a KeyError or TypeError (exit 3, BUG): a DsOpsError, which a deploy handles."""
    sup = Supervisor(FakeAgentExecutor(line), "/work", python="python3", reconnect_s=0)
    with contextlib.suppress(DsOpsError):
        _method_calls(sup)[which]()


@settings(derandomize=True, max_examples=100, deadline=None)
@given(raw=st.text(max_size=60) | _VALUES.map(json.dumps))
def test_the_agent_answers_any_request_line_with_a_reply(raw: str) -> None:
    reply = agent_main._answer(raw)
    assert reply["ok"] is False and isinstance(reply["kind"], str)
    json.dumps(reply)  # one line on the wire


def test_the_agent_s_reply_carries_the_request_s_id() -> None:
    reply = agent_main._answer(json.dumps({"op": "nope", "workdir": "/w", "id": "abc"}))
    assert reply["id"] == "abc" and reply["kind"] == "bad_request"
    assert "id" not in agent_main._answer("not json at all")


# --- through the real agent: a session, a one-shot process, a one-shot process over SSH ---

_OTHER_REPLY = json.dumps({"ok": True, "result": {"released": True}})  # a lock_release's


@pytest.fixture(params=["session", "one-shot", pytest.param("ssh", marks=pytest.mark.ssh)])
def transport(request: pytest.FixtureRequest) -> Executor:
    if request.param == "session":
        return LocalExecutor()
    if request.param == "one-shot":
        return OneShotLocalExecutor()
    ex: Executor = request.getfixturevalue("sshd").executor()
    request.addfinalizer(ex.close)
    return ex


@pytest.mark.slow
@pytest.mark.parametrize(
    ("to", "line"),
    [("stdout", _OTHER_REPLY), ("stdout", "WARNING: a library says hello"), ("stdin", "garbage")],
    ids=["another-reply-on-stdout", "text-on-stdout", "garbage-on-stdin"],
)
def test_a_stray_line_is_that_call_s_transport_failure_and_the_next_calls_are_answered(
    transport: Executor, workdir: Path, tmp_path: Path, to: str, line: str
) -> None:
    folder = tmp_path / "python"
    sup = Supervisor(transport, str(workdir), python=tampering_python(folder))
    try:
        before = sup.ensure_agent()  # uploaded, and a session started where there is one
        once = tamper_once(folder, "wait_http", to, line, name="decode")
        (port,) = free_ports(1)
        t0 = time.monotonic()
        with pytest.raises(AgentCallError) as caught:
            sup.wait_http_result(f"http://127.0.0.1:{port}/", timeout_s=0.5, proc_name="decode")
        assert once.exists()
        assert caught.value.kind == "transport", caught.value
        assert "not the answer to this request" in str(caught.value)
        assert "whether it ran on the target is unknown" in str(caught.value)
        assert time.monotonic() - t0 < 20
        # The calls after it get their own replies, not the one the session still owed.
        assert sup.lock_release("op-nobody") is False
        after = sup.ensure_agent()
        assert after["sha256"] == before["sha256"]
        if type(transport) is LocalExecutor:
            assert after["pid"] != before["pid"]  # the session that said it was replaced
    finally:
        sup.close()


@pytest.mark.slow
def test_an_older_agent_s_stale_refusal_without_an_id_still_gets_it_replaced(
    workdir: Path,
) -> None:
    """What an agent from before request ids answers a newer operator (its version differs)."""
    zip_path = workdir / ".dsv4ops" / "agent.zip"
    zip_path.parent.mkdir(parents=True)
    refusal = {"ok": False, "kind": "stale_agent", "error": "different version"}

    with zipfile.ZipFile(zip_path, "w") as zf:
        zf.writestr("__main__.py", f"import sys; sys.stdout.write({json.dumps(refusal)!r})\n")
    sup = Supervisor(LocalExecutor(), str(workdir), python=sys.executable)
    try:
        assert sup.ensure_agent()["sha256"] != ""
        assert zip_path.read_bytes() != b"" and zipfile.is_zipfile(zip_path)
    finally:
        sup.close()
