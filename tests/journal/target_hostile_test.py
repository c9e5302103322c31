"""The journal of record under attack and fault, through the real agent over the real OpenSSH
(dsv4ops/journal/target.py, dsv4ops/remote/agent/journal.py, dsv4ops/journal/recordfile.py):
a symlinked record is refused and nothing lands in the victim; a record that lost history never
silently replaces the operator's copy; a kill -9 inside an append leaves a torn line the next
append terminates."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.errors import DsOpsError, JournalError
from dsv4ops.journal import recordfile
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.journal.target import TargetJournal
from dsv4ops.remote import Supervisor
from testing.journal import records
from testing.remote import SshdServer

TARGET = "box"
pytestmark = pytest.mark.ssh


@pytest.fixture
def over_ssh(sshd: SshdServer, tmp_path: Path) -> Iterator[Supervisor]:
    with sshd.executor() as executor:
        yield Supervisor(executor, str(tmp_path / "workdir"), python="/usr/bin/python3")


def _journal(box: Supervisor, state: Path, **kw: Any) -> Journal:
    return Journal(TARGET, backend=TargetJournal(box, state / "journal" / f"{TARGET}.jsonl", **kw))


def _backend(j: Journal) -> TargetJournal:
    assert isinstance(j.backend, TargetJournal)  # every journal here is built by _journal
    return j.backend


def _deploy(j: Journal, profile: str) -> str:
    op = j.begin(Kind.DEPLOY, profile={"name": profile}, components=[{"name": "decode"}])
    j.transition(op, Status.RUNNING)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def test_a_symlinked_record_is_refused_and_the_victim_untouched(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    alice = _journal(over_ssh, tmp_path / "alice")
    first = _deploy(alice, "baseline")
    record = Path(over_ssh.workdir) / "journal.jsonl"
    saved, victim = tmp_path / "SAVED", tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    os.replace(record, saved)
    record.symlink_to(victim)
    cache_before = alice.path.read_bytes()

    with pytest.raises(JournalError, match="symbolic link") as exc:
        _journal(over_ssh, tmp_path / "alice").begin(Kind.STOP, reason="x")
    assert "nothing was read or written" in str(exc.value)
    with pytest.raises(JournalError, match="symbolic link"):
        records(_journal(over_ssh, tmp_path / "bob"))
    assert victim.read_bytes() == b"precious\n"  # not one record appended to it
    assert alice.path.read_bytes() == cache_before  # the cache was not overwritten with it
    assert first in cache_before.decode()


def test_a_record_writable_by_others_is_refused(over_ssh: Supervisor, tmp_path: Path) -> None:
    alice = _journal(over_ssh, tmp_path / "alice")
    _deploy(alice, "baseline")
    record = Path(over_ssh.workdir) / "journal.jsonl"
    record.chmod(0o666)
    with pytest.raises(JournalError, match="writable by group or others"):
        records(_journal(over_ssh, tmp_path / "bob"))


def test_a_shorter_record_keeps_both_copies_and_refuses_mutations_until_merged(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    alice = _journal(over_ssh, tmp_path / "alice")
    ops = [_deploy(alice, f"p{i}") for i in range(6)]
    record = Path(over_ssh.workdir) / "journal.jsonl"
    full = record.read_bytes()
    # The target's record restored from an old backup: the first two deploys only.
    record.write_bytes(b"".join(full.splitlines(keepends=True)[: 2 * 4]))
    os.chmod(record, 0o600)

    reader = _journal(over_ssh, tmp_path / "alice", offline_ok=True)
    assert [o.op for o in reader.operations()] == ops[:2]  # the target's word, shown as such
    d = reader.source()["diverged"]
    assert d["copy_records"] == 24 and d["target_records"] == 8 and d["missing_on_target"] == 16
    assert d["newer"] == "cache"
    kept = Path(d["copy"])
    assert kept.read_bytes() == full  # nothing of the operator's history was dropped

    writer = _journal(over_ssh, tmp_path / "alice")
    with pytest.raises(JournalError, match="lacks 16 of the 24") as exc:
        writer.begin(Kind.STOP, reason="must wait")
    assert f"dsv4ops journal --target {TARGET} --merge" in (exc.value.hint or "")
    assert len(recordfile.parse(record.read_bytes())[0]) == 8  # nothing appended

    done = _backend(writer).merge_diverged()
    assert done["merged"] == 16 and done["ops"] == ops[2:]
    assert not kept.exists() and Path(done["copy"]).exists()
    after = _journal(over_ssh, tmp_path / "alice")
    assert [o.op for o in after.operations()] == ops
    after.begin(Kind.STOP, reason="now allowed")


def test_a_divergence_heals_by_itself_once_the_record_is_whole_again_over_ssh(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    """Issue 39: the record put back whole after a read of a shorter copy: no merge is needed
    (it used to refuse every mutation with "lacks 0 of the N records" for ever)."""
    alice = _journal(over_ssh, tmp_path / "alice")
    ops = [_deploy(alice, f"p{i}") for i in range(3)]
    record = Path(over_ssh.workdir) / "journal.jsonl"
    full = record.read_bytes()
    record.write_bytes(b"".join(full.splitlines(keepends=True)[:4]))
    reader = _journal(over_ssh, tmp_path / "alice", offline_ok=True)
    assert [o.op for o in reader.operations()] == ops[:1]
    assert reader.source()["diverged"]["missing_on_target"] == 8
    with pytest.raises(JournalError, match="lacks 8 of the 12"):
        _journal(over_ssh, tmp_path / "alice").begin(Kind.STOP, reason="must wait")
    record.write_bytes(full)  # the whole record restored from its backup
    notes: list[str] = []
    writer = _journal(over_ssh, tmp_path / "alice", notify=notes.append)
    writer.begin(Kind.STOP, reason="healed")
    assert any("the divergence is over" in n for n in notes), notes
    assert [o.op for o in writer.operations()][:3] == ops
    assert "diverged" not in writer.source()


def test_merge_is_the_first_call_after_a_cut_over_ssh(over_ssh: Supervisor, tmp_path: Path) -> None:
    alice = _journal(over_ssh, tmp_path / "alice")
    ops = [_deploy(alice, f"p{i}") for i in range(3)]
    record = Path(over_ssh.workdir) / "journal.jsonl"
    record.write_bytes(b"".join(record.read_bytes().splitlines(keepends=True)[:4]))
    fresh = _backend(_journal(over_ssh, tmp_path / "alice", offline_ok=True))
    done = fresh.merge_diverged()  # nothing read since the cut: it syncs first
    assert done["merged"] == 8 and done["ops"] == ops[1:]
    assert [o.op for o in _journal(over_ssh, tmp_path / "bob").operations()] == ops


def test_a_kill_9_inside_an_append_leaves_a_torn_line_the_next_append_ends(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    alice = _journal(over_ssh, tmp_path / "alice")
    first = _deploy(alice, "baseline")
    record = Path(over_ssh.workdir) / "journal.jsonl"
    # An appender killed with SIGKILL after writing half of its line (the write is not atomic
    # for the kernel once the process dies between two writes of a large record).
    script = (
        "import os,sys,signal;fd=os.open(sys.argv[1],os.O_WRONLY|os.O_APPEND);"
        'os.write(fd,b\'{"v":1,"op":"d-torn","ty\');os.kill(os.getpid(),signal.SIGKILL)'
    )
    done = subprocess.run([sys.executable, "-c", script, str(record)], timeout=30)
    assert done.returncode == -signal.SIGKILL
    bob = _journal(over_ssh, tmp_path / "bob")
    assert [o.op for o in bob.operations()] == [first] and bob.skipped_lines == [5]
    second = _deploy(bob, "later")
    assert [o.op for o in _journal(over_ssh, tmp_path / "carol").operations()] == [first, second]


def _agents_of(workdir: Path) -> list[int]:
    """Live agent processes run from this workdir's agent zip (ours: the test started them)."""
    want = f"{workdir}/.dsv4ops/agent.zip".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if want in f.read():
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def test_a_kill_9_of_the_agent_inside_its_append_loses_nothing(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    """The agent SIGKILLed inside journal_append, while it waits for the record's flock (held
    here): nothing is appended, the CLI gets an error instead of a success, and the next append
    through a fresh agent finds the record intact."""
    import threading
    import time

    alice = _journal(over_ssh, tmp_path / "alice")
    first = _deploy(alice, "baseline")
    record = Path(over_ssh.workdir) / "journal.jsonl"
    before = record.read_bytes()
    errors: list[BaseException] = []

    def append() -> None:
        try:
            alice.begin(Kind.STOP, reason="killed inside the append")
        except BaseException as exc:  # noqa: BLE001 - the test asserts what it was
            errors.append(exc)

    with recordfile.exclusive(str(record)):
        worker = threading.Thread(target=append)
        worker.start()
        deadline = time.monotonic() + 30
        while not (pids := _agents_of(Path(over_ssh.workdir))) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pids, "the agent never started"
        time.sleep(0.3)  # it is blocked in flock now (the lock is ours)
        for pid in pids:
            # one that exited since the scan (the SSH wrapper's short-lived python) is gone anyway
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.join(timeout=60)
    assert not worker.is_alive() and errors, "the killed append must not report success"
    assert isinstance(errors[0], DsOpsError), repr(errors[0])  # a clear error, no traceback
    assert record.read_bytes() == before  # nothing of it reached the record
    later = _deploy(_journal(over_ssh, tmp_path / "bob"), "later")
    assert [o.op for o in _journal(over_ssh, tmp_path / "carol").operations()] == [first, later]


def test_the_cache_is_written_0600_under_a_group_writable_umask(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    """Ubuntu's default user umask is 002: a cache written with it would be group-writable and
    refused by the journal's own checks on the next read."""
    old = os.umask(0o002)
    try:
        alice = _journal(over_ssh, tmp_path / "alice")
        first = _deploy(alice, "baseline")
        assert [o.op for o in _journal(over_ssh, tmp_path / "alice").operations()] == [first]
    finally:
        os.umask(old)
    assert alice.path.stat().st_mode & 0o077 == 0


def test_a_symlinked_target_directory_is_refused_over_ssh(sshd: SshdServer, tmp_path: Path) -> None:
    """The agent walks the record's directories without following a link (recordfile._open_dir):
    a `.dsv4ops/<target>/` replaced by a symlink is refused, nothing lands where it points."""
    real = tmp_path / ".dsv4ops" / TARGET
    with sshd.executor() as executor:
        box = Supervisor(executor, str(real), python="/usr/bin/python3")
        _deploy(_journal(box, tmp_path / "alice"), "baseline")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        os.replace(real, tmp_path / "SAVED")
        real.symlink_to(elsewhere, target_is_directory=True)
        with pytest.raises(JournalError, match="symbolic link"):
            records(_journal(box, tmp_path / "bob"))
        with pytest.raises(JournalError, match="symbolic link"):
            _journal(box, tmp_path / "alice").begin(Kind.STOP, reason="x")
    assert not (elsewhere / "journal.jsonl").exists()


def test_the_agent_reads_only_what_a_proven_copy_lacks_over_ssh(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    """journal_read is incremental (offset + the copy's window proof); a diverged copy of the
    same size gets everything with reset, and the operator keeps both copies."""
    alice = _journal(over_ssh, tmp_path / "alice")
    _deploy(alice, "baseline")
    cache = alice.path.read_bytes()
    later = _deploy(_journal(over_ssh, tmp_path / "bob"), "next")
    reply = over_ssh.call(
        "journal_read", offset=len(cache), prefix_window=recordfile.window_of(cache)
    )
    record = (Path(over_ssh.workdir) / "journal.jsonl").read_bytes()
    assert reply["reset"] is False and reply["data"].encode() == record[len(cache) :]
    assert later in reply["data"] and reply["window"] == recordfile.window_of(record)
    last = cache.splitlines(keepends=True)[-1]
    op = json.loads(last)["op"]
    # Same size, other bytes: the last record names an operation the record never had.
    forged = cache[: -len(last)] + last.replace(op.encode(), op[:-1].encode() + b"#")
    assert len(forged) == len(cache)
    reply = over_ssh.call(
        "journal_read", offset=len(forged), prefix_window=recordfile.window_of(forged)
    )
    assert reply["reset"] is True and reply["data"].encode() == record
    alice.path.write_bytes(forged)  # the operator's copy no longer a prefix of the record
    marker = _backend(alice).marker
    marker.write_text(
        marker.read_text().replace(  # as if the sync had left it so
            f'"window": "{recordfile.window_of(cache)}"',
            f'"window": "{recordfile.window_of(forged)}"',
        )
    )
    again = _journal(over_ssh, tmp_path / "alice")
    with pytest.raises(JournalError, match="lacks"):
        again.begin(Kind.STOP, reason="x")  # refused until `journal --merge`
    assert Path(f"{alice.path}.diverged").read_bytes() == forged  # both copies kept
    assert alice.path.read_bytes() == record


def test_a_synced_cache_grows_by_appends_and_its_marker_proves_it(
    over_ssh: Supervisor, tmp_path: Path
) -> None:
    """The copy is appended to (same file), never rewritten per call; `.sync.json` holds the size
    and window proof the next call sends, not a hash of the whole copy."""
    alice = _journal(over_ssh, tmp_path / "alice")
    _deploy(alice, "baseline")
    inode = alice.path.stat().st_ino
    _deploy(alice, "next")
    assert alice.path.stat().st_ino == inode
    marker = json.loads(_backend(alice).marker.read_text())
    data = alice.path.read_bytes()
    assert marker["size"] == len(data) and marker["window"] == recordfile.window_of(data)
    assert data == (Path(over_ssh.workdir) / "journal.jsonl").read_bytes()
