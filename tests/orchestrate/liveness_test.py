"""A readiness wait ends at once when a component the run started before it has exited (the
prefill killed while the router waits for /readiness), not at the wait's own timeout."""

from __future__ import annotations

from pathlib import Path

from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.liveness import exited_meanwhile
from testing.clock import FakeClock
from testing.orchestrate import FakeControl, PrefillDiesWhileRouterWaits, make_deployment, operator


def test_the_router_wait_fails_within_a_slice_naming_the_exited_prefill(tmp_path: Path) -> None:
    journal = Journal("fake", directory=tmp_path, clock=FakeClock())
    control = PrefillDiesWhileRouterWaits()
    control.armed = True
    out = operator(control, journal).deploy(make_deployment("candidate"))
    # no known-good to return to here (the fallback is not this test's subject): all stopped
    assert not out.ok and out.status == Status.FAILED.value, out.message
    assert control.router_waits == 1  # one slice, not the 180 s of the router's timeout
    assert "failed at 'wait until router is ready" in out.message
    assert "prefill (pid " in out.message and "exited while waiting for router" in out.message
    assert "--- last log lines of prefill ---\nprefill log" in out.message


def test_nothing_is_reported_while_every_earlier_component_runs_or_none_was_started() -> None:
    control = FakeControl(running={"prefill": 7, "decode": 8})
    assert exited_meanwhile(control, {"prefill": 7, "decode": 8}, "router") is None
    assert exited_meanwhile(control, {}, "router") is None
    # the awaited component's own death is the wait's to report (it watches its process)
    assert exited_meanwhile(FakeControl(), {"router": 9}, "router") is None
    gone = exited_meanwhile(
        FakeControl(running={"prefill": 7}), {"prefill": 7, "decode": 8}, "router"
    )
    assert gone is not None and gone.startswith("decode (pid 8, started by this run) exited")
