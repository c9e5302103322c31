"""`dsv4ops stop`: a bad timeout variable is one clear line, nothing changed; a wedged decode is
stopped, not drained."""

from __future__ import annotations

import contextlib
import re
import time

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from testing.orchestrate import OrchEnv, cli


def test_a_bad_ready_timeout_variable_is_one_clear_line(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSV4OPS_READY_TIMEOUT_S", "abc")
    before = Journal(env.target).operations()
    code = main(["stop", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    first = err.strip().splitlines()[0]
    assert "DSV4OPS_READY_TIMEOUT_S='abc'" in first and "positive number" in first
    assert "Traceback" not in err and "internal error" not in err
    assert Journal(env.target).operations() == before  # refused before the stop began


@pytest.mark.slow
def test_a_wedged_decode_with_streams_in_flight_is_stopped_not_drained(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23: stopping (or rolling back from) a wedged decode waited out the drain bound on
    its frozen gauges; a busy decode whose progress counter stands still is judged at once."""
    import threading

    import httpx

    env = baseline_running
    dep = Journal(env.target).deployed().deployment()  # type: ignore[union-attr]
    chat = dep.component("router").url("/v1/chat/completions")
    body = {
        "model": dep.model_name,
        "stream": True,
        "max_tokens": 100_000,
        "messages": [{"role": "user", "content": "a long answer"}],
    }

    def stream() -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream("POST", chat, json=body, timeout=httpx.Timeout(60.0, connect=5.0)) as resp,
        ):
            for _ in resp.iter_bytes():
                pass

    streams = [threading.Thread(target=stream, daemon=True) for _ in range(4)]
    for t in streams:
        t.start()
    decode = dep.component("decode")
    deadline = time.monotonic() + 30
    while (
        "sglang:num_running_reqs" not in (text := httpx.get(decode.url("/metrics"), timeout=5).text)
        or re.search(r"num_running_reqs\{[^}]*\} [1-9]", text) is None
    ):
        assert time.monotonic() < deadline, "the streams never ran"
        time.sleep(0.2)
    httpx.post(
        decode.url("/_twin/hazard"), json={"hazard": "wedge", "state": "force"}, timeout=5
    ).raise_for_status()
    code, out, err = cli(env, capsys, "stop", "--yes", "--json")
    for t in streams:
        t.join(timeout=30)
    assert code == 0, err
    drain = next(s for s in out["steps"] if s["action"] == "drain")
    assert "made no progress" in drain["detail"] and "wedged, not drained" in drain["detail"], drain
    assert drain["duration_s"] < 10.0, drain
    # issue 38: status after stop says STOPPED (exit 2: not serving), names the stop and the
    # command that starts the unit again, and shows no pid of a process that is gone
    code, doc, _ = cli(env, capsys, "status", "--json")
    assert (code, doc["status"], doc["exit"]) == (2, "STOPPED", 2), doc
    assert doc["stopped"]["last_profile"] == dep.profile_name
    assert [c["pid"] for c in doc["components"]] == [None, None, None]
    code, text, _ = cli(env, capsys, "status")
    assert text.splitlines()[0] == f"target {env.target}: STOPPED"
    assert f"`dsv4ops deploy {dep.profile_name} --target {env.target}` starts it again" in text
