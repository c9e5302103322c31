"""BlockResult records round-trip and malformed ones are refused with ValueError."""

from __future__ import annotations

import math

import pytest

from dsv4ops.ab.model import METRICS, BlockResult, higher_is_better


def test_a_block_round_trips_through_its_record() -> None:
    blk = BlockResult(
        3,
        "B",
        "overlap-on",
        "op-7",
        "2026-12-01T14:00:00Z",
        180.0,
        {60: {"output_tok_s": 748.1, "itl_p99_ms": 91.0}, 0: {"step_a_ms": 13.1}},
        complete=False,
    )
    assert BlockResult.from_record(blk.to_record()) == blk


def test_only_throughput_is_higher_is_better() -> None:
    assert [m for m in METRICS if higher_is_better(m)] == ["output_tok_s"]


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"index": 0, "arm": "C", "profile": "x"},
        {"index": 0, "arm": "A", "profile": "x", "values": {"a": {}}},
        {"index": 0, "arm": "A", "profile": "x", "values": []},
    ],
)
def test_a_malformed_record_is_a_value_error(record: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BlockResult.from_record(record)


def test_a_non_finite_value_reads_as_absent() -> None:
    blk = BlockResult(0, "A", "x", None, "", 1.0, {8: {"output_tok_s": math.nan}})
    assert blk.value(8, "output_tok_s") is None and blk.value(9, "output_tok_s") is None
