"""The journal of record on the target (dsv4ops/journal/target.py) through the real
agent zip run by the real Supervisor: two operators' caches, one history; the merge of an
operator-side journal, once and journaled; the lock fence; the unreachable target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.errors import JournalError, TargetError
from dsv4ops.journal import recordfile
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import Journal
from dsv4ops.journal.target import TargetJournal
from dsv4ops.remote import LocalExecutor, Supervisor
from dsv4ops.remote.ssh import SSHExecutor
from testing.clock import FakeClock
from testing.journal import gate_step, records
from testing.ports import free_port
from testing.remote import SshdServer

TARGET = "box"


def _op(o: Operation | None) -> str:
    assert o is not None  # the journal names an operation here
    return o.op


@pytest.fixture
def box(tmp_path: Path) -> Supervisor:
    return Supervisor(LocalExecutor(), str(tmp_path / "workdir"))


def _journal(box: Supervisor, state: Path, **kw: Any) -> Journal:
    cache = state / "journal" / f"{TARGET}.jsonl"
    return Journal(TARGET, backend=TargetJournal(box, cache, **kw))


def _record(box: Supervisor) -> list[dict[str, Any]]:
    data = (Path(box.workdir) / "journal.jsonl").read_bytes()
    return [r for _, r in recordfile.parse(data)[0]]


def _deploy(j: Journal, profile: str, *, good: bool = True) -> str:
    op = j.begin(Kind.DEPLOY, profile={"name": profile}, components=[{"name": "decode"}])
    j.transition(op, Status.RUNNING)
    gate_step(j, op)  # gated: known-good when proven
    j.transition(op, Status.SUCCEEDED, running=op, known_good=good)
    return op


def test_two_operators_see_one_history_and_one_known_good_list(
    box: Supervisor, tmp_path: Path
) -> None:
    alice, bob = _journal(box, tmp_path / "alice"), _journal(box, tmp_path / "bob")
    first = _deploy(alice, "baseline")
    assert [o.op for o in bob.known_good()] == [first]  # bob never saw it locally
    second = _deploy(bob, "multi-stream-on")
    assert _op(alice.deployed()) == second and [o.op for o in alice.known_good()] == [second, first]
    # Each cache is the target's record byte for byte after its own read, and says when.
    record = (Path(box.workdir) / "journal.jsonl").read_bytes()
    for j in (alice, bob):
        records(j)
        assert j.path.read_bytes() == record
        src = j.source()
        assert src["source"] == "target" and src["synced_at"] and src["age_s"] is not None
        assert src["record"].endswith(f"{box.workdir}/journal.jsonl")


def test_an_operator_side_journal_is_merged_once_without_duplicates(
    box: Supervisor, tmp_path: Path
) -> None:
    # Before the journal of record: bob's deploy lives only in bob's own file (no sync marker).
    legacy = Journal(TARGET, directory=tmp_path / "bob" / "journal", clock=FakeClock(0))
    old = _deploy(legacy, "baseline")  # 1970: older than anything on the target
    alice = _journal(box, tmp_path / "alice")
    new = _deploy(alice, "multi-stream-on")

    bob = _journal(box, tmp_path / "bob")
    ops = bob.operations()
    assert [o.op for o in ops] == [old, new]  # the merged op takes its place by its time
    assert _op(bob.deployed()) == new  # ... so it does not pose as the newest deployment
    (merge,) = bob.listing(1)[2]
    assert merge["ops"] == [old] and merge["records"] == 5 and merge["user"]
    assert str(tmp_path / "bob") in merge["source"]
    assert (tmp_path / "bob" / "journal" / f"{TARGET}.jsonl.pre-merge").exists()

    # Again, from bob and from a copy of his old file elsewhere: nothing is appended twice.
    before = _record(box)
    records(bob)
    copy = tmp_path / "carol" / "journal"
    copy.mkdir(parents=True)
    (copy / f"{TARGET}.jsonl").write_bytes(
        (tmp_path / "bob" / "journal" / f"{TARGET}.jsonl.pre-merge").read_bytes()
    )
    records(_journal(box, tmp_path / "carol"))
    assert _record(box) == before
    keys = recordfile.record_keys(before)
    assert len(keys) == len(set(keys))


def test_a_write_through_a_plain_file_journal_reaches_the_record(
    box: Supervisor, tmp_path: Path
) -> None:
    alice = _journal(box, tmp_path / "alice")
    _deploy(alice, "baseline")
    stray = Journal(TARGET, directory=tmp_path / "alice" / "journal")  # e.g. an older tool
    op = stray.begin(Kind.STOP, reason="by hand")
    bob = _journal(box, tmp_path / "bob")
    assert op not in {o.op for o in bob.operations()}  # not on the target yet
    assert op in {o.op for o in alice.operations()}  # alice's next read merges it
    assert op in {o.op for o in bob.operations()}


def test_an_operation_that_lost_the_lock_cannot_append(box: Supervisor, tmp_path: Path) -> None:
    alice = _journal(box, tmp_path / "alice")
    box.lock_acquire({"op_id": "d-alice", "pid": 1, "host": "elsewhere"})
    with alice.under_lock("d-alice"):
        alice.begin(Kind.DEPLOY, op_id="d-alice")
    box.lock_acquire({"op_id": "r-bob", "pid": 2, "host": "elsewhere"}, force=True)  # bob broke it
    before = _record(box)
    with alice.under_lock("d-alice"), pytest.raises(JournalError, match="no longer holds") as exc:
        alice.transition("d-alice", Status.RUNNING)
    assert "r-bob" in str(exc.value)
    assert _record(box) == before


def test_reads_under_the_lock_after_an_accepted_append_cost_no_round_trip(
    box: Supervisor, tmp_path: Path
) -> None:
    calls: list[str] = []
    real = box.call

    def counting(op: str, *a: Any, **kw: Any) -> dict[str, Any]:
        calls.append(op)
        return real(op, *a, **kw)

    box.call = counting  # type: ignore[method-assign]
    j = _journal(box, tmp_path / "alice")
    box.lock_acquire({"op_id": "d-1", "pid": 1, "host": "elsewhere"})
    with j.under_lock("d-1"):
        j.in_flight()
        calls.clear()
        j.begin(Kind.DEPLOY, op_id="d-1")
        j.transition("d-1", Status.RUNNING)
        j.step("d-1", "start decode", "start")
        j.transition("d-1", Status.SUCCEEDED, running="d-1")
    # begin (two records) is one call; each transition reads the cache its last append refreshed
    assert calls == ["journal_append"] * 4
    j.in_flight()  # outside the lock: a real read again
    assert calls[-1] == "journal_read"


def test_unreachable_target_reads_answer_from_the_cache_and_writes_refuse(
    box: Supervisor, tmp_path: Path
) -> None:
    state = tmp_path / "alice"
    op = _deploy(_journal(box, state), "baseline")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    gone = Supervisor(
        SSHExecutor(
            "127.0.0.1", port=free_port(), known_hosts=str(known_hosts), connect_timeout_s=2
        ),
        box.workdir,
    )
    reader = _journal(gone, state, offline_ok=True)
    assert _op(reader.deployed()) == op
    src = reader.source()
    assert src["source"] == "cache" and "cannot connect" in src["error"]
    assert (
        src["synced_at"]
        == json.loads((state / "journal" / f"{TARGET}.sync.json").read_text())["synced_at"]
    )
    cached = reader.path.read_bytes()

    writer = _journal(gone, state)
    with pytest.raises(TargetError, match="nothing was changed") as exc:
        writer.in_flight()
    # the commands it names read this target, not the default one
    assert f"`dsv4ops status --target {TARGET}`" in (exc.value.hint or ""), exc.value.hint
    with pytest.raises(TargetError, match="nothing was changed"):
        writer.begin(Kind.STOP)
    assert reader.path.read_bytes() == cached


@pytest.mark.ssh
def test_append_and_read_through_the_real_ssh_path(
    box: Supervisor, tmp_path: Path, sshd: SshdServer
) -> None:
    """Alice reaches the box over SSH (a real OpenSSH server), bob runs on it: one record."""
    with sshd.executor() as executor:
        over_ssh = Supervisor(executor, box.workdir, python="/usr/bin/python3")
        alice = _journal(over_ssh, tmp_path / "alice")
        op = _deploy(alice, "baseline")
        bob = _journal(box, tmp_path / "bob")
        assert [o.op for o in bob.known_good()] == [op]
        later = _deploy(bob, "multi-stream-on")
        assert _op(alice.deployed()) == later and alice.source()["source"] == "target"
        assert alice.path.read_bytes() == (Path(box.workdir) / "journal.jsonl").read_bytes()
