"""Operation ids: one process never draws the same id twice, however many it draws a second."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.journal import opids
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.clock import FakeClock
from testing.journal import gate_step

NOW = "20261203T141737"


def _tokens(*values: str) -> Iterator[str]:
    """`values`, then more: none of them hex, so no id another test of this process drew (the
    process remembers every id) can equal one of these."""
    yield from values
    yield from (f"zz{i:02d}" for i in itertools.count())


def test_an_id_this_process_drew_is_drawn_again() -> None:
    token = _tokens("xa1b", "xa1b", "xc3d").__next__
    first = opids.draw("d", NOW, lambda _n: token())
    second = opids.draw("d", NOW, lambda _n: token())
    assert first == "d-20261203T141737-xa1b" and second == "d-20261203T141737-xc3d"


def test_two_operations_begun_in_one_second_with_one_draw_stay_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What columns_test met by chance: two deploys in one second drew one id, the journal folded
    them into one operation and the known-good list lost the newer."""
    token = _tokens("ye5f", "ye5f").__next__
    monkeypatch.setattr("secrets.token_hex", lambda _n: token())
    j = Journal("box", directory=tmp_path, clock=FakeClock())
    ops: list[str] = []
    for name in ("older", "newer"):
        op = j.begin(
            Kind.DEPLOY,
            profile={"name": name, "commands_hash": name},
            components=[{"name": "decode"}],
        )
        j.transition(op, Status.RUNNING)
        gate_step(j, op)
        j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
        ops.append(op)
    assert ops[0] != ops[1]
    fresh = Journal("box", directory=tmp_path)
    assert [o.op for o in fresh.operations()] == ops
    assert fresh.last_known_good().op == ops[1]  # type: ignore[union-attr]
