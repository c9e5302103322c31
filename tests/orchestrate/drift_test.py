from __future__ import annotations

from dsv4ops.orchestrate.drift import process_drift, profile_drift
from dsv4ops.orchestrate.model import ComponentSpec, Deployment
from dsv4ops.remote.base import ProcessState
from tests.orchestrate.ops_test import make_deployment


def _states(d, pids=None, **override):
    out = {}
    for c in d.components:
        out[c.name] = ProcessState(
            c.name,
            (pids or {}).get(c.name, 10),
            True,
            started_at="t0",
            argv=c.argv,
            env=dict(c.env),
        )
    out.update(override)
    return out


def test_no_drift_when_everything_matches():
    d = make_deployment("b")
    rec = {n: {"pid": 10, "started_at": "t0"} for n in ("prefill", "decode", "router")}
    assert process_drift(_states(d), d, rec) == []


def test_restarted_outside_the_tool_and_down_and_changed_argv():
    d = make_deployment("b")
    rec = {n: {"pid": 10, "started_at": "t0"} for n in ("prefill", "decode", "router")}
    states = _states(d, pids={"decode": 77})
    states["router"] = ProcessState("router", 5, False, exit_code=1)
    states["prefill"] = ProcessState(
        "prefill", 10, True, started_at="t0", argv=(*d.component("prefill").argv, "--x"), env={}
    )
    drift = process_drift(states, d, rec)
    assert any("decode was restarted outside dsv4ops" in s and "pid 77" in s for s in drift)
    assert any("router is not running (exit code 1)" in s for s in drift)
    assert any("prefill runs a different command" in s and "--x" in s for s in drift)


def test_processes_without_a_recorded_deployment():
    d = make_deployment("b")
    assert "no current deployment" in process_drift(_states(d), None, {})[0]


def test_profile_changed_in_working_copy():
    d = make_deployment("b")
    c = d.component("decode")
    changed = Deployment(
        "b",
        (
            d.component("prefill"),
            ComponentSpec("decode", (*c.argv, "--new"), c.env, c.host, c.port, c.ports),
            d.component("router"),
        ),
    )
    assert "renders different commands for decode" in profile_drift(d, changed)[0]
    assert profile_drift(d, d) == []
