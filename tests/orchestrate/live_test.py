"""Behaviour on the target, through the CLI, on the twin with the real sglang-router:
the drain lets a client stream finish, the deploy's canary runs (PASS is journaled; a FAIL
rolls back to the last known-good), and the decode-only override restarts only the decode.

One module environment: each test starts from the baseline deployed (`baseline_running`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.pd import OVERRIDE_FLAG
from dsv4ops.orchestrate.pd import WARNING as PD_WARNING
from testing.orchestrate import (
    OrchEnv,
    assert_baseline_restored,
    cli,
    module_env,
    our_processes,
    read_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.router]

# The twin's corruption hazard under its real-world condition (multi-stream overlap on and a
# padded batch of at least CORRUPT_MIN_BS): 8 keeps the end-to-end probe (batch 1) and the smoke
# canary (concurrency 4) clean and makes the 16-session corruption suite hit it. Forcing it with
# DSV4_TWIN_FORCE=corrupt would corrupt the baseline too, so its restore could not be judged.
# A decode step of 80 model ms (4 ms wall at the test time scale) so a stream lasts seconds
# because the decode is generating it, not because a busy client is reading buffered tokens.
# A decode restarted alone degrades its pair (the twin's degrade hazard): a seeded fraction of
# rooms is lost, but the router draws each request's room at random, so whether the end-to-end
# probe after the override's decode-only restart met one was chance (its deploy then rolled back).
# Fraction 0: the pair is still marked degraded (asserted), and the probe's verdict is certain.
TWIN_ENV = {
    "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "0",
    "DSV4_TWIN_CORRUPT_MIN_BS": "8",
    "DSV4_TWIN_CORRUPT_PROB": "0.5",
    "DSV4_TWIN_STEP_A_MS": "80",
}
STREAM_TOKENS = 500  # ~2 s


@pytest.fixture(scope="module")
def orch_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    yield from module_env(tmp_path_factory, TWIN_ENV)


def _stream(url: str, result: dict[str, Any], first_token: threading.Event) -> None:
    """One long streaming chat completion; records what a client would see."""
    body = {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": STREAM_TOKENS,
        "stream": True,
    }
    pieces, done, finish, errors = 0, False, None, []
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(30.0)) as client,
            client.stream("POST", url, json=body) as reply,
        ):
            result["status"] = reply.status_code
            for line in reply.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    continue
                event = json.loads(payload)
                if "error" in event:
                    errors.append(event["error"])
                for choice in event.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        pieces += 1
                        first_token.set()
                    finish = choice.get("finish_reason") or finish
    except httpx.HTTPError as exc:
        errors.append(repr(exc))
    result.update(pieces=pieces, done=done, finish=finish, errors=errors, ended=time.time())


# serial: the drain is timed (the stream must end inside the drain's bound), so it runs while no
# other worker runs a test (testing/workers.py); the canary verdicts after it rest on what the
# suites find and share the machine at the test run's self-check bound (tests/conftest.py).
@pytest.mark.serial
def test_redeploy_drains_a_client_stream_instead_of_cutting_it(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream starts once the deploy is journaled and about to run its steps (the first is
    the drain), and the deploy goes on only after its first token: so it is open when the drain
    begins however long the steps before took on a loaded machine (no race with them)."""
    from dsv4ops.cli import _context

    env = baseline_running
    url = f"http://127.0.0.1:{env.port(8000)}/v1/chat/completions"
    result: dict[str, Any] = {}
    first_token = threading.Event()
    client = threading.Thread(target=_stream, args=(url, result, first_token), daemon=True)
    printer = _context.progress_printer
    started: list[float] = []

    def stream_before_the_drain(as_json: bool):  # type: ignore[no-untyped-def]
        echo = printer(as_json)

        def progress(line: str) -> None:
            echo(line)
            if line.startswith("deploy ") and "(journal " in line and not started:
                started.append(time.time())
                client.start()
                assert first_token.wait(10), result

        return progress

    monkeypatch.setattr(_context, "progress_printer", stream_before_the_drain)
    code, out, err = cli(env, capsys, "deploy", "baseline", "--yes", "--json", "--no-canary")
    assert started, err
    t_deploy = started[0]
    client.join(30)
    assert not client.is_alive()
    assert code == 0, err

    # The client saw a normal, complete stream: every token, the finish reason, [DONE].
    assert result["status"] == 200 and result["errors"] == [], result
    assert result["done"] and result["finish"] == "length", result
    assert result["pieces"] >= STREAM_TOKENS * 0.95, result
    # The deploy had to wait for it (it was far from done when the deploy began) ...
    assert result["ended"] - t_deploy > 1.0, result
    drain = next(s for s in out["steps"] if s["action"] == "drain")
    assert drain["detail"].startswith("router drained and exited"), drain
    assert "waited for in-flight requests (decode up to 1" in drain["detail"], (drain, err)
    assert 0.5 < drain["duration_s"] < 15.0, drain  # bounded by the twin target's 15 s
    stop_router = next(s for s in out["steps"] if s["title"] == "stop router")
    assert stop_router["detail"] == "exited during the drain"
    # ... and the old decode was shut down only after the stream ended, with no abort on it.
    # the twin writes each event's ts as a JSON number; read_events types the values as object
    events = [e for e in read_events(env) if e["ts"] >= t_deploy]  # type: ignore[operator]
    decode_down = next(e for e in events if e["role"] == "decode" and e["event"] == "shutdown")
    assert decode_down["ts"] > result["ended"]
    assert not [e for e in events if e["event"] in ("abort_cascade", "wedged")]
    # The progress lines (stderr under --json) showed the drain watching the workers: the
    # gauge (published every decode-log-interval iterations) or, when it still read 0, the
    # progress counter moving under it (orchestrate/drain.py).
    assert "router draining" in err
    assert "decode 1 running" in err or "decode 0 running/0 queued (progress counter moving" in err


def test_deploy_with_the_smoke_canary_journals_its_verdict(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    code, out, err = cli(
        env, capsys, "deploy", "baseline", "--yes", "--json", "--canary-duration", "3"
    )
    assert code == 0, err
    assert out["status"] == "SUCCEEDED"
    canary = next(s for s in out["steps"] if s["action"] == P.CANARY)
    assert canary["ok"] and canary["detail"].startswith("PASS (smoke: PASS"), canary
    op = Journal(env.target).get(out["op_id"])
    recorded = [
        s
        for s in op.steps
        if s.name == "canary: smoke + the suites the change calls for" and s.phase == "done"
    ]
    assert recorded and (recorded[0].detail or "").startswith("PASS (smoke: PASS"), op.steps
    assert op.status is Status.SUCCEEDED
    # ... with the smoke's throughput at its load, which `dsv4ops watch` reads back
    from dsv4ops.watch.baseline import baseline_from_operations

    j = Journal(env.target)
    baseline = baseline_from_operations(j.operations(), j.deployed())
    assert baseline is not None and baseline.tokens_per_s > 0 and baseline.concurrency > 0
    assert out["op_id"] in baseline.source


def test_canary_fail_on_a_flag_change_rolls_back_to_the_last_known_good(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    good = Journal(env.target).deployed()
    assert good is not None  # the baseline runs
    # Accepting INCONCLUSIVE (a 2-core machine can make the client's self-check distrust its
    # own timings) must not weaken a FAIL: the corruption suite's FAIL still rolls back.
    code, out, err = cli(
        env,
        capsys,
        "deploy",
        "multi-stream-canary",
        "--yes",
        "--json",
        "--canary-duration",
        "2",
        "--accept-inconclusive-canary",
    )
    assert code == 2, err
    assert out["status"] == "ROLLED_BACK" and out["profile"] == "multi-stream-canary"
    canary = next(s for s in out["steps"] if s["action"] == P.CANARY)
    # Multi-stream overlap changed, so the flag-aware canary ran the corruption suite, which
    # caught the twin's corrupted tool calls (the probe, at batch 1, could not).
    assert not canary["ok"] and "corruption: FAIL" in canary["detail"], canary
    assert "tool-call corruption" in canary["detail"] or "garbled" in canary["detail"]
    assert "smoke: PASS" in canary["detail"] or "smoke: INCONCLUSIVE" in canary["detail"]
    assert [e for e in read_events(env) if e["event"] == "corrupted"]
    assert (
        "Rolled back automatically" in out["message"] and "Running now: baseline" in out["message"]
    )
    op = Journal(env.target).get(out["op_id"])
    assert op.status is Status.ROLLED_BACK and op.running == good.op
    assert_baseline_restored(env, capsys)


def test_decode_only_override_restarts_only_the_decode_and_warns_loudly(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    before = len(read_events(env))
    pids = {c["name"]: c["pid"] for c in cli(env, capsys, "status", "--json")[1]["components"]}
    code, text, err = cli(
        env, capsys, "deploy", "baseline", "--only", "decode", OVERRIDE_FLAG, "--yes", "--no-canary"
    )
    assert code == 0, err
    events = read_events(env)[before:]
    restarted = {e["role"] for e in events if e["event"] == "started"}
    stopped = {e["role"] for e in events if e["event"] == "shutdown"}
    assert "decode" in restarted and "decode" in stopped
    assert "prefill" not in restarted and "prefill" not in stopped  # twin event log
    assert [e for e in events if e["event"] == "degraded"]  # the stale peer the prefill now holds
    now = {c["name"]: c["pid"] for c in cli(env, capsys, "status", "--json")[1]["components"]}
    assert now["prefill"] == pids["prefill"] and now["decode"] != pids["decode"]
    assert len(our_processes(env)) == 3
    # Loud: first thing printed, repeated as the last line, and in the journal (its listing too).
    lines = text.splitlines()
    assert lines[0].startswith(PD_WARNING) and lines[-1].startswith(PD_WARNING), text
    assert "ALONE" in lines[0] and OVERRIDE_FLAG in lines[0]
    op = Journal(env.target).deployed()
    assert op is not None and (op.message or "").startswith(PD_WARNING)
    assert any(s.name == PD_WARNING and "ALONE" in (s.detail or "") for s in op.steps)
    code, listing, _ = cli(env, capsys, "journal")
    assert code == 0 and PD_WARNING in listing.splitlines()[-1]


def test_status_shows_the_pd_timeouts_the_servers_run_with(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 44 item 2: how long a silently lost KV transfer holds its request (NIXL sends no
    failure notice, sglang#36033) is the profile's, said by `status`."""
    env = baseline_running
    _, report, _ = cli(env, capsys, "status", "--json")
    assert report["pd_timeouts"] == {
        "decode_waiting_s": 300,
        "decode_waiting_s_source": "profile",
        "prefill_bootstrap_s": 300,
        "prefill_bootstrap_s_source": "profile",
    }
    _, text, _ = cli(env, capsys, "status")
    assert "PD timeouts: decode waits 300 s for a KV transfer (profile), prefill 300 s" in text
