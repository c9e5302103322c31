"""The journaled-operation context (orchestrate/operation.py) and the kernel switch that now runs
under it (usecases/kernels.py): lock, begin, transitions, release, stale locks and
interrupted operations, the same for every kind of operation."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

import pytest

from dsv4ops.errors import KernelPackageError, LockHeldError
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.operation import journaled_operation
from dsv4ops.usecases import kernels as kernel_usecase
from dsv4ops.usecases.session import TargetSession
from testing.clock import FakeClock
from testing.orchestrate import FakeControl


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def test_begin_finish_and_release(journal: Journal) -> None:
    control = FakeControl()
    with journaled_operation(control, journal, Kind.STOP, command="t") as op:
        assert (
            control.lock is not None
            and control.lock["op_id"] == op.op_id
            and journal.operations() == []
        )
        op.begin(reason="why")
        assert journal.get(op.op_id).status is Status.RUNNING
        op.finish(Status.SUCCEEDED, message="done")
    assert control.calls == ["lock", "unlock"] and control.lock is None
    (rec,) = journal.operations()
    assert (rec.kind, rec.status, rec.reason, rec.message) == (
        Kind.STOP,
        Status.SUCCEEDED,
        "why",
        "done",
    )


def test_the_lock_is_released_when_the_body_raises(journal: Journal) -> None:
    control = FakeControl()
    with pytest.raises(RuntimeError), journaled_operation(control, journal, Kind.STOP, command="t"):
        raise RuntimeError("boom")
    assert control.calls == ["lock", "unlock"]


def test_a_live_holder_refuses_before_anything_is_journaled(journal: Journal) -> None:
    control = FakeControl(lock={"op_id": "other", "pid": 1})
    refused = pytest.raises(LockHeldError, match="held by pid 1")
    with refused, journaled_operation(control, journal, Kind.KERNELS, command="t"):
        pytest.fail("the body must not run")
    assert (
        journal.operations() == [] and control.lock is not None and control.lock["op_id"] == "other"
    )


def test_an_interrupted_operation_blocks_until_recover(journal: Journal) -> None:
    old = journal.begin(Kind.DEPLOY, profile={"name": "baseline"})
    journal.transition(old, Status.RUNNING)
    control = FakeControl()
    refused = pytest.raises(LockHeldError, match="never ended")
    with refused, journaled_operation(control, journal, Kind.STOP, command="t"):
        pytest.fail("the body must not run")
    assert control.lock is None  # released again by the refusal
    lines: list[str] = []
    with journaled_operation(
        control, journal, Kind.STOP, command="t", recover=True, progress=lines.append
    ) as op:
        assert any("was interrupted" in n for n in op.notes)
    assert journal.get(old).status is Status.ABANDONED
    assert any(line.startswith("note: deploy " + old) for line in lines)


def session(control: FakeControl, journal: Journal) -> TargetSession:
    target = SimpleNamespace(name="fake", workdir="/work", python="python3", launcher="twin")
    return TargetSession(target, control, journal)  # type: ignore[arg-type]


def test_a_kernel_switch_is_journaled_under_the_lock(journal: Journal) -> None:
    control = FakeControl()
    result = {"name": "k", "version": "2", "previous": "1", "config_dir": "/work/kernels/k/2"}
    out = kernel_usecase._switch(
        session(control, journal),
        {"action": "deploy", "artifact": "a"},
        lambda: result,
        progress=lambda _l: None,
        recover=False,
    )
    assert out is result and control.calls == ["lock", "unlock"]
    (op,) = journal.operations()
    assert (op.kind, op.status) == (Kind.KERNELS, Status.SUCCEEDED)
    assert op.kernel == {
        "action": "deploy",
        "artifact": "a",
        "package": "k@2",
        "previous": "1",
        "config_dir": "/work/kernels/k/2",
    }


def test_a_failed_kernel_switch_is_journaled_failed_and_releases_the_lock(journal: Journal) -> None:
    control = FakeControl()

    def refuse() -> NoReturn:
        raise KernelPackageError("checksum mismatch\nmore")

    with pytest.raises(KernelPackageError):
        kernel_usecase._switch(
            session(control, journal),
            {"action": "deploy", "artifact": "a"},
            refuse,
            progress=lambda _l: None,
            recover=False,
        )
    (op,) = journal.operations()
    assert (op.status, op.message) == (Status.FAILED, "checksum mismatch")
    assert control.lock is None


def test_a_kernel_switch_gets_the_deploys_stale_lock_and_interrupt_handling(
    journal: Journal,
) -> None:
    """It used to take the lock its own way: a dead deploy's lock, or a deploy the journal shows
    never ended, now blocks it with the same message and the same `--recover`."""
    old = journal.begin(Kind.DEPLOY, profile={"name": "baseline"})
    journal.transition(old, Status.RUNNING)
    control = FakeControl(lock={"op_id": old, "pid": 999999}, lock_stale=True)
    asked = {"action": "rollback", "name": "k", "to": None}
    result = {"name": "k", "version": "1", "previous": "2", "config_dir": "/d"}
    with pytest.raises(LockHeldError, match="was interrupted") as refused:
        kernel_usecase._switch(
            session(control, journal),
            asked,
            lambda: result,
            progress=lambda _l: None,
            recover=False,
        )
    assert "--recover" in (refused.value.hint or "")
    assert [o.op for o in journal.operations()] == [old]  # nothing journaled for the refusal
    kernel_usecase._switch(
        session(control, journal), asked, lambda: result, progress=lambda _l: None, recover=True
    )
    assert journal.get(old).status is Status.ABANDONED
    assert journal.operations()[-1].status is Status.SUCCEEDED and control.lock is None
