"""The journal's file rules (dsv4ops/journal/recordfile.py), shared by the local store and the agent:
one write per append with a torn last line terminated first, torn lines skipped on read, and the
record identity (op id + sequence) the merge deduplicates by."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from dsv4ops.journal import recordfile
from dsv4ops.jsontypes import JSONObject


def test_an_append_after_a_torn_line_starts_on_a_line_of_its_own(tmp_path: Path) -> None:
    path = str(tmp_path / "j" / "box.jsonl")
    recordfile.append_bytes(path, recordfile.encode({"op": "a"}))
    with open(path, "ab") as f:
        f.write(b'{"op": "b", "tor')  # a crash mid-write
    recordfile.append_bytes(path, recordfile.encode({"op": "c"}))
    records, torn = recordfile.parse(recordfile.read_bytes(path))
    assert [r["op"] for _, r in records] == ["a", "c"] and torn == [2]
    assert (Path(path).stat().st_mode & 0o777) == 0o600


def test_records_are_identified_by_op_and_sequence() -> None:
    present: list[JSONObject] = [{"op": "a"}, {"op": "b"}, {"op": "a"}]
    incoming: list[JSONObject] = [{"op": "a"}, {"op": "a"}, {"op": "a", "x": 1}, {"op": "c"}]
    assert recordfile.record_keys(present) == [("a", 0), ("b", 0), ("a", 1)]
    assert recordfile.missing_records(present, incoming) == [{"op": "a", "x": 1}, {"op": "c"}]
    assert recordfile.missing_records(present + incoming, incoming) == []


def test_a_symlinked_directory_above_the_journal_is_refused(tmp_path: Path) -> None:
    """O_NOFOLLOW guards the last component only: the directories are walked one by one."""
    import pytest

    real, elsewhere = tmp_path / ".dsv4ops" / "box", tmp_path / "elsewhere"
    elsewhere.mkdir()
    recordfile.append_bytes(str(real / "journal.jsonl"), recordfile.encode({"op": "a"}))
    os.replace(real, tmp_path / "saved")
    real.symlink_to(elsewhere, target_is_directory=True)
    for call in (
        lambda: recordfile.append_bytes(str(real / "journal.jsonl"), b"{}\n"),
        lambda: recordfile.read_bytes(str(real / "journal.jsonl")),
        lambda: recordfile.write_atomic(str(real / "journal.jsonl.idx"), b"x"),
    ):
        with pytest.raises(recordfile.UnsafeJournalFile, match="symbolic link"):
            call()
    assert list(elsewhere.iterdir()) == []  # nothing created through the link


def test_a_copy_proves_its_prefix_by_its_window_and_gets_only_the_rest(tmp_path: Path) -> None:
    path = str(tmp_path / "j" / "box.jsonl")
    recordfile.append_bytes(path, b"a" * 70_000 + b"\n")
    copy = Path(path).read_bytes()
    recordfile.append_bytes(path, b"line2\n")
    proof = recordfile.window_of(copy)
    assert recordfile.read_since(path, len(copy), proof)[:2] == (b"line2\n", False)
    other = b"b" + copy[1:]  # differs outside the window only: the proof cannot see it
    assert recordfile.read_since(path, len(other), recordfile.window_of(other))[1] is False
    diverged = copy[:-2] + b"b\n"
    whole = Path(path).read_bytes()
    assert recordfile.read_since(path, len(diverged), recordfile.window_of(diverged))[:2] == (
        whole,
        True,
    )
    assert recordfile.read_since(path, len(whole) + 5, proof)[:2] == (whole, True)  # longer copy
    assert recordfile.proof(path) == (len(whole), recordfile.window_of(whole))


def test_two_threads_replacing_one_file_never_take_each_others_temp_file(tmp_path: Path) -> None:
    # A deploy and a refused second deploy in one process (the CLI's in-process callers, a
    # runbook) both rewrite the journal cache's sync marker: a temp name per process only made
    # one thread's rename take the other's temp file (FileNotFoundError mid-deploy, CI).
    path = str(tmp_path / "journal" / "t.sync.json")
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(tag: bytes) -> None:
        start.wait()
        try:
            for _ in range(300):
                recordfile.write_atomic(path, tag)
        except BaseException as exc:  # the test's subject: collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in (b"a\n", b"b\n")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert Path(path).read_bytes() in (b"a\n", b"b\n")
    assert sorted(os.listdir(tmp_path / "journal")) == ["t.sync.json"]  # no temp file left


def test_the_agent_reads_record_types_by_the_names_the_schema_declares() -> None:
    """The agent (stdlib only: it ships recordfile, not schema) reads a record's type through
    recordfile, whose names the typed records are declared by: one spelling of each."""
    from dsv4ops.journal.schema import RECORD_TYPES, BeginRecord, MergeRecord

    assert (BeginRecord.TYPE, MergeRecord.TYPE) == (recordfile.BEGIN, recordfile.MERGE)
    assert {recordfile.BEGIN, recordfile.MERGE} <= set(RECORD_TYPES)
    records: list[JSONObject] = [
        {"type": "begin", "op": "a"},
        {"type": "step", "op": "a"},
        {"type": ["begin"], "op": "x"},  # no type: never read as a begin
        {"type": "begin", "op": "b"},
    ]
    assert recordfile.began(records) == ["a", "b"]
    assert [recordfile.record_type(r) for r in records] == ["begin", "step", None, "begin"]
