"""A stop gives each component the grace of the deployment it runs from (the profile's
`<component>.stop_grace_s` as recorded), never the grace of the profile being deployed, then
SIGKILLs what outlived it."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.deployment import Deployment
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.engine import Runner, RunSettings
from dsv4ops.orchestrate.timeouts import Timeouts
from dsv4ops.profiles import load_profile, load_targets, render
from dsv4ops.remote import LocalExecutor, ProcessSpec, Supervisor
from dsv4ops.timings import AFTER_DRAIN_GRACE_S, STOP_GRACE_S
from testing.clock import FakeClock
from testing.orchestrate import FakeControl, make_deployment, operator
from testing.profiles import child, make_profiles_dir
from testing.remote import kill_recorded_groups

# A decode wedged past SIGTERM: it ignores the signal (after saying so in its ready file).
IGNORES_TERM = (
    sys.executable,
    "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').close(); time.sleep(600)",
)


def _graced(name: str, offset: int, **graces: float) -> Deployment:
    d = make_deployment(name, offset)
    return dataclasses.replace(
        d,
        components=tuple(
            dataclasses.replace(c, stop_grace_s=graces.get(c.name, c.stop_grace_s))
            for c in d.components
        ),
    )


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def test_a_deploy_stops_the_old_processes_with_their_grace_and_a_stop_with_the_new(
    journal: Journal,
) -> None:
    control = FakeControl()
    old = _graced("old", 0, prefill=45, decode=3)
    assert operator(control, journal).deploy(old).ok
    control.graces.clear()
    new = _graced("new", 10, prefill=9, decode=120)
    assert operator(control, journal).deploy(new).ok
    # the processes running were deployed with old's graces; the router was drained first
    assert control.graces == [("router", AFTER_DRAIN_GRACE_S), ("decode", 3), ("prefill", 45)]
    control.graces.clear()
    assert operator(control, journal).stop().ok
    assert control.graces == [("router", AFTER_DRAIN_GRACE_S), ("decode", 120), ("prefill", 9)]


def test_a_cap_cuts_the_grace_and_nothing_recorded_gets_the_default() -> None:
    running = _graced("old", 0, decode=3, prefill=400)
    capped = Timeouts(stop_grace_cap_s=25)
    assert capped.grace_for("prefill", started={}, running=running) == 25
    assert capped.grace_for("decode", started={}, running=running) == 3
    assert Timeouts().grace_for("decode", started={}, running=None) == STOP_GRACE_S
    # what this operation started itself is stopped with the grace it was started with
    assert Timeouts().grace_for("decode", started={"decode": 7}, running=running) == 7


@pytest.fixture
def sup(tmp_path: Path) -> Iterator[Supervisor]:
    wd = tmp_path / "wd"
    yield Supervisor(LocalExecutor(), str(wd), python=sys.executable)
    kill_recorded_groups(wd)


def test_a_decode_ignoring_sigterm_is_killed_after_the_profiles_grace(
    tmp_path: Path, sup: Supervisor, journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    profiles = make_profiles_dir(tmp_path, quick=child("decode:\n  stop_grace_s: 3\n"))
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
    box = load_targets()["box"]
    running = render(load_profile("quick"), box)  # what was deployed: decode's grace 3 s
    deploying = render(load_profile("base"), box)  # the profile of the deploy now: 30 s
    ready = tmp_path / "ignoring"
    sup.start(ProcessSpec("decode", (*IGNORES_TERM, str(ready)), {}, ()))
    deadline = time.monotonic() + 10
    while not ready.exists():
        assert time.monotonic() < deadline, "the toy decode never started"
        time.sleep(0.02)
    runner = Runner(sup, journal, "op-1", RunSettings())
    runner.known = running
    t0 = time.monotonic()
    runner.run_step(P.Step(P.STOP, "stop decode", "decode"), deploying)
    took = time.monotonic() - t0
    # the grace, then SIGKILL: well under the 30 s default and the twin cap of 25 s (the slack is
    # for a loaded machine: the SIGKILL, the group gone, the port check)
    assert 3.0 <= took < 15.0, took
    assert runner.log.timings[-1].detail == "SIGKILL needed after the grace period"
    assert not sup.status(["decode"])["decode"].alive
