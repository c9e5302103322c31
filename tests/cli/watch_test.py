"""`dsv4ops watch` end to end on a deployed twin target (the real router, the target agent):
`--once` exits 4 (UNKNOWN) when there is nothing to watch, 0 on the healthy baseline (JSON lines, probes
through the router), 2 when the decode is wedged. It never restarts anything: the wedged
decode is still the same process afterwards."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from dsv4ops.cli import main
from dsv4ops.cli.watch import render
from dsv4ops.journal.store import Journal
from dsv4ops.jsontypes import JSONObject
from dsv4ops.watch import Watcher, WatchSettings
from testing.clock import FakeClock
from testing.orchestrate import OrchEnv
from testing.watch import ENDPOINTS, FakeUnit

pytestmark = [pytest.mark.slow, pytest.mark.router]


def _once(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, list[JSONObject], str]:
    code = main(["watch", "--once", "--json", "--target", env.target, *extra])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_nothing_recorded_is_exit_4_with_a_clear_message(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    if Journal(env.target).deployed() is not None:
        pytest.skip("the module's environment already has a deployment")
    code, rounds, err = _once(env, capsys)
    assert code == 4 and rounds == [
        {"error": rounds[0]["error"], "hint": rounds[0]["hint"], "exit": 4}
    ]  # --json: the error is one object on stdout
    assert "records no running deployment" in err and "Traceback" not in err


def test_once_on_the_healthy_baseline_then_on_a_wedged_decode(
    baseline_running: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    env = baseline_running
    code, rounds, err = _once(env, capsys)
    assert code == 0, err + json.dumps(rounds[-1:])
    assert len(rounds) >= 2 and all(r["worst"] == "ok" and not r["findings"] for r in rounds)
    first = rounds[0]
    assert [p["status"] for p in first["probes"]] == ["ok", "ok"]
    assert all(c["up"] for c in first["components"].values())

    with socket.socket() as busy:  # a port already taken: a clear error, no traceback
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        code, rounds, err = _once(env, capsys, "--prometheus-port", str(busy.getsockname()[1]))
    assert code == 4 and [r["exit"] for r in rounds] == [4] and "round" not in rounds[0]
    assert "cannot listen" in err and "Traceback" not in err

    decode = Journal(env.target).deployed().deployment().component("decode")  # type: ignore[union-attr]
    pid = httpx.get(decode.url("/_twin/state"), timeout=5).json()["pid"]
    assert pid
    httpx.post(
        decode.url("/_twin/hazard"), json={"hazard": "wedge", "state": "force"}, timeout=5
    ).raise_for_status()
    code, rounds, err = _once(env, capsys, "--prometheus-port", "0")
    assert code == 2 and "findings on http://127.0.0.1:" in err
    codes = {f["code"] for f in rounds[-1]["findings"]}
    assert "probe_stalled" in codes or "decode_wedged" in codes, rounds[-1]["findings"]
    assert all(f["runbook"].startswith("runbooks/") for f in rounds[-1]["findings"])
    assert httpx.get(decode.url("/_twin/state"), timeout=5).json().get("pid") == pid


def test_the_live_view_is_a_line_per_component_then_the_findings() -> None:
    unit = FakeUnit(probe="corrupt")
    unit.decoding()
    lines = render(Watcher(ENDPOINTS, WatchSettings(), unit, FakeClock()).tick())
    assert lines[0].endswith("round 1: CRITICAL")
    assert [line.split()[0] for line in lines[1:5]] == ["prefill", "decode", "router", "probes"]
    assert "running 4" in lines[2] and "workers 2/2 healthy" in lines[3]
    assert lines[5].startswith("  CRITICAL tool_call_corruption (decode)")
    assert lines[5].endswith("-> runbooks/tool-call-corruption.md")
