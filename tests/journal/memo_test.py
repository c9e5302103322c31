"""journal/memo.py: a growing journal folded once per byte gives exactly what a full fold of the
same bytes gives, never changes an Operation handed out before, and starts over when the bytes
are not a continuation (the target's record reset)."""

from __future__ import annotations

from dsv4ops import journalfile
from dsv4ops.journal.memo import Folded
from dsv4ops.journal.records import RECORD_VERSION, Operation, Status, fold, validate


def _line(op: str, rtype: str, **kw: object) -> bytes:
    base = {"v": RECORD_VERSION, "ts": f"2026-12-01T00:00:0{len(op) % 10}Z", "op": op, "type": rtype}
    if rtype == "begin":
        base.update(kind="deploy", user="u")
    return journalfile.encode({**base, **kw})


def _full(data: bytes) -> tuple[list[Operation], list[int]]:
    parsed, torn = journalfile.parse(data)
    return fold([validate(r, "x") for _, r in parsed]), torn


def test_folding_the_tail_equals_folding_everything_and_keeps_old_operations() -> None:
    data = _line("d-1", "begin") + _line("d-1", "status", status="RUNNING")
    f = Folded("j")
    first = f.operations(data)
    assert first == _full(data)[0] and first[0].status is Status.RUNNING
    data += _line("d-1", "step", name="a", phase="done") + _line("d-1", "status", status="SUCCEEDED")
    data += _line("d-2", "begin")
    later = f.operations(data)
    assert later == _full(data)[0]
    assert first[0].status is Status.RUNNING and first[0].steps == []  # handed out: unchanged
    assert [o.op for o in later] == ["d-1", "d-2"] and later[0].status is Status.SUCCEEDED


def test_a_partial_last_line_is_read_but_never_folded_in() -> None:
    whole = _line("d-1", "begin")
    f = Folded("j")
    records, torn = f.records(whole + b'{"v":1,"op":"d-1","ty')
    assert len(records) == 1 and torn == [2]
    done = whole + _line("d-1", "status", status="RUNNING")  # the writer finished its line
    assert f.operations(done)[0].status is Status.RUNNING and f.records(done)[1] == []


def test_bytes_that_do_not_continue_the_folded_ones_start_over() -> None:
    f = Folded("j")
    f.operations(_line("d-1", "begin") + _line("d-2", "begin"))
    other = _line("d-9", "begin")
    assert [o.op for o in f.operations(other)] == ["d-9"]
