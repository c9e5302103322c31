from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import NoReturn

import pytest

from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import DeployError, ProfileError
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.restore import fallbacks_for, rebuild, rollback_target
from testing.clock import FakeClock
from testing.journal import gate_step
from testing.orchestrate import make_deployment, with_recorded


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def record(
    journal: Journal, dep: Deployment, status: Status = Status.SUCCEEDED, kind: Kind = Kind.DEPLOY
) -> Operation:
    op = journal.begin(kind, profile=dep.profile_record(), components=dep.component_records())
    journal.transition(op, Status.RUNNING)
    ok = status is Status.SUCCEEDED
    gate_step(journal, op)
    journal.transition(op, status, running=op if ok else "", known_good=ok)
    return journal.get(op)


def test_rollback_goes_to_the_previous_known_good_not_what_runs(journal: Journal) -> None:
    a = record(journal, make_deployment("a"))
    record(journal, make_deployment("b", 7))
    assert rollback_target(journal, None).op == a.op


def test_rollback_after_a_failed_deploy_goes_to_last_known_good(journal: Journal) -> None:
    a = record(journal, make_deployment("a"))
    b = record(journal, make_deployment("b", 7))
    record(journal, make_deployment("c", 9), status=Status.FAILED)
    assert rollback_target(journal, None).op == b.op  # nothing runs: restore the newest good one
    assert rollback_target(journal, a.op).op == a.op
    with pytest.raises(DeployError, match="matches 3 journal entries"):
        rollback_target(journal, "d-")


def test_rollback_to_a_commit_prefix_and_errors(journal: Journal) -> None:
    a = record(journal, make_deployment("a"))
    assert rollback_target(journal, "c0ffeea").op == a.op
    with pytest.raises(DeployError, match="no deployment in the journal matches"):
        rollback_target(journal, "zzz")
    with pytest.raises(DeployError, match="no earlier known-good"):
        rollback_target(journal, None)


def test_rebuild_prefers_git_at_the_recorded_commit(journal: Journal) -> None:
    dep = make_deployment("a")
    op = record(journal, dep)
    seen: list[str] = []

    def at_commit(path: str, commit: str) -> Deployment:
        seen.append(commit)
        return dep

    dep_path = dataclasses.replace(dep, profile_path="/p/a.yaml")
    op = record(journal, dep_path)
    got, how = rebuild(op, at_commit)
    assert seen == ["c0ffeea"] and "read from git at c0ffeea" in how and got.source_op == op.op


def test_rebuild_falls_back_to_recorded_commands_when_git_differs(journal: Journal) -> None:
    dep = dataclasses.replace(make_deployment("a"), profile_path="/p/a.yaml")
    op = record(journal, dep)
    got, how = rebuild(op, lambda p, c: make_deployment("a", 3))
    assert got.commands_hash == dep.commands_hash and "exact commands recorded" in how

    def unreadable(p: str, c: str) -> NoReturn:
        raise ProfileError("not readable at git revision")

    assert rebuild(op, unreadable)[0].commands_hash == dep.commands_hash


def test_rebuild_refuses_recorded_commands_with_redacted_secrets(journal: Journal) -> None:
    d = make_deployment("a")
    c = d.component("decode")
    secret = Deployment(
        "s",
        (
            d.component("prefill"),
            Component("decode", c.argv, {"HF_TOKEN": "x"}, c.host, c.port, c.ports),
            d.component("router"),
        ),
    )
    op = record(journal, secret)
    with pytest.raises(DeployError, match="redacted secrets"):
        rebuild(op, None)


def test_the_automatic_rollback_skips_a_known_good_whose_recorded_settings_do_not_read(
    journal: Journal,
) -> None:
    """Its probe would read them after the failed deploy stopped: named and skipped up front."""
    a = record(journal, make_deployment("a"))
    bad = with_recorded(make_deployment("b", 7), content={"probe": {"tool_call": "forced"}})
    b = record(journal, bad)
    notes: list[str] = []
    found = fallbacks_for(journal, None, progress=notes.append)
    assert [op.op for op, _dep in found] == [a.op]
    assert notes == [
        f"note: cannot use {b.op} as the automatic rollback target: journal operation {b.op} "
        "records probe.tool_call = 'forced', which is not one of required, auto, off: dsv4ops "
        "will not guess what that deployment was set to"
    ]
