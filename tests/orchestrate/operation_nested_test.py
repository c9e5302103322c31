"""`nested_operation`: an operation inside one that holds the deploy lock (an A/B experiment's
block deploys) journals itself, and only runs while its parent is in progress."""

from __future__ import annotations

import pytest

from dsv4ops.errors import DsOpsError
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.interrupts import InterruptGate
from dsv4ops.orchestrate.operation import RunningOperation, nested_operation


def test_a_nested_operation_journals_itself_only_while_its_parent_runs() -> None:
    journal, gate = Journal("twin-local"), InterruptGate()
    parent = RunningOperation(journal, Kind.EXPERIMENT, journal.new_op_id(Kind.EXPERIMENT), gate)
    with (
        pytest.raises(DsOpsError, match="not in progress"),
        nested_operation(journal, Kind.DEPLOY, parent, gate=gate),
    ):
        pass  # not begun yet
    parent.begin(profile={"name": "a vs b"})
    with nested_operation(journal, Kind.DEPLOY, parent, gate=gate) as child:
        child.begin(profile={"name": "b"}, reason=f"experiment {parent.op_id}: block 1 (B)")
        child.finish(Status.SUCCEEDED, running=child.op_id)
    assert journal.get(child.op_id).reason == f"experiment {parent.op_id}: block 1 (B)"
    assert [o.op for o in journal.in_flight()] == [parent.op_id]
    parent.finish(Status.SUCCEEDED)
    with (
        pytest.raises(DsOpsError, match="not in progress"),
        nested_operation(journal, Kind.DEPLOY, parent, gate=gate),
    ):
        pass
