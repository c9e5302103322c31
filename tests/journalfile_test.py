"""The journal's file rules (dsv4ops/journalfile.py), shared by the local store and the agent:
one write per append with a torn last line terminated first, torn lines skipped on read, and the
record identity (op id + sequence) the merge deduplicates by."""

from __future__ import annotations

from pathlib import Path

from dsv4ops import journalfile
from dsv4ops.jsontypes import JSONObject


def test_an_append_after_a_torn_line_starts_on_a_line_of_its_own(tmp_path: Path) -> None:
    path = str(tmp_path / "j" / "box.jsonl")
    journalfile.append_bytes(path, journalfile.encode({"op": "a"}))
    with open(path, "ab") as f:
        f.write(b'{"op": "b", "tor')  # a crash mid-write
    journalfile.append_bytes(path, journalfile.encode({"op": "c"}))
    records, torn = journalfile.parse(journalfile.read_bytes(path))
    assert [r["op"] for _, r in records] == ["a", "c"] and torn == [2]
    assert (Path(path).stat().st_mode & 0o777) == 0o600


def test_records_are_identified_by_op_and_sequence() -> None:
    present: list[JSONObject] = [{"op": "a"}, {"op": "b"}, {"op": "a"}]
    incoming: list[JSONObject] = [{"op": "a"}, {"op": "a"}, {"op": "a", "x": 1}, {"op": "c"}]
    assert journalfile.record_keys(present) == [("a", 0), ("b", 0), ("a", 1)]
    assert journalfile.missing_records(present, incoming) == [{"op": "a", "x": 1}, {"op": "c"}]
    assert journalfile.missing_records(present + incoming, incoming) == []


def test_a_reader_gets_its_missing_tail_or_everything_when_its_copy_diverged() -> None:
    data = b"line1\nline2\n"
    six = journalfile.sha256(b"line1\n")
    assert journalfile.tail_after(data, 6, six) == (b"line2\n", False)
    assert journalfile.tail_after(data, 6, journalfile.sha256(b"other\n")) == (data, True)
    assert journalfile.tail_after(data, 99, six) == (data, True)
    assert journalfile.tail_after(data, 0, None) == (data, True)
