"""The record types (journal/schema.py): every shipped format, read from a real file of it,
parses through the one migrator; the current format round-trips through parse_record/to_json
byte for byte; a record that fails its type is a damaged line named `file:line`, the rest read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.errors import JournalError
from dsv4ops.journal import schema
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.schema import (
    FORMATS,
    BeginRecord,
    RecordError,
    StatusRecord,
    migrate,
    parse_record,
    to_json,
)
from dsv4ops.journal.store import Journal
from testing.clock import FakeClock
from testing.journal import fold, gate_step, records

FIXTURES = Path(__file__).parent / "fixtures"


def _lines(name: str) -> list[str]:
    return [ln for ln in (FIXTURES / name).read_text().splitlines() if ln.strip()]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.fixture)
def test_every_shipped_format_reads_through_the_one_migrator(fmt: schema.Format) -> None:
    """A real journal of each format: every line a typed record, none a damaged one; what the
    format lacked reads as its declared default, and its gate steps fold into GateResults
    through the one migrator (the pre-GateResults format: tests/journal/knowngood_test.py
    proves every judgement the same)."""
    raw = [json.loads(ln) for ln in _lines(fmt.fixture)]
    records = [parse_record(r, f"{fmt.fixture}:{n}") for n, r in enumerate(raw, 1)]
    assert len(records) == len(raw) > 0
    begins = {r.op: r for r in records if isinstance(r, BeginRecord)}
    assert all(b.gates is None for b in begins.values())  # no version before wrote the marker
    migrated = [migrate(r, begins[r.op]) for r in records if r.op in begins]
    assert [type(r) for r in migrated] == [type(r) for r in records if r.op in begins]
    ops = fold(records)
    assert ops and all(o.ts and o.user for o in ops)
    for o in ops:
        if {c["name"] for c in o.components} == {"prefill", "decode", "router"}:
            assert o.deployment().commands_hash  # the recorded deployment, rebuilt
        assert o.gates == [s.gate for s in o.steps if s.gate is not None]  # migrated steps


def test_the_first_format_is_read_as_its_version_wrote_it() -> None:
    """first_6e6d7b0.jsonl was written by 6e6d7b0's own journal/store.py (git archive 6e6d7b0,
    rendering that commit's profiles/baseline.yaml for its `box` target): no known_good mark,
    no gates marker, components without bootstrap_port / metrics_port."""
    raw = [json.loads(ln) for ln in _lines("first_6e6d7b0.jsonl")]
    assert all("known_good" not in r and "gates" not in r for r in raw)
    deploy, stop = fold([parse_record(r, "x") for r in raw])
    assert (deploy.status, deploy.running, deploy.processes["prefill"]["pid"]) == (
        Status.SUCCEEDED,
        deploy.op,
        42,
    )
    assert not deploy.proven  # never marked known-good: not judged so now either
    assert deploy.deployment().component("prefill").ports == (30000, 8998)
    assert (stop.kind, stop.status, stop.running, stop.message) == (
        Kind.STOP,
        Status.SUCCEEDED,
        "",
        "stopped",
    )


def test_the_current_format_round_trips_and_migrate_leaves_it_as_it_is(tmp_path: Path) -> None:
    """Every line the store writes is to_json of its parsed record, byte for byte: the shape is
    declared once, and the migrator has nothing to add to it."""
    j = Journal("box", directory=tmp_path, clock=FakeClock())
    op = j.begin(
        Kind.DEPLOY,
        profile={"name": "p", "commands_hash": "h"},
        components=[{"name": "prefill", "argv": ["python"]}],
        scope={"restarted": ["decode"]},
    )
    j.transition(op, Status.RUNNING)
    j.step(op, "start decode", "start")
    j.step(op, "start decode", "done", duration_s=1.23456, detail="pid 7")
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, processes={"d": {"pid": 7}}, known_good=True)
    k = j.begin(Kind.KERNELS, kernel={"package": "pkg"})
    j.transition(k, Status.FAILED, message="no", kernel={"version": "1"})
    begin = records(j)[0]
    assert isinstance(begin, BeginRecord)
    for n, line in enumerate(j.path.read_text().splitlines(), 1):
        obj = json.loads(line)
        rec = parse_record(obj, f"{j.path}:{n}")
        assert to_json(rec) == obj and migrate(rec, begin) is rec
        assert json.dumps(to_json(rec), sort_keys=True, separators=(",", ":")) == line
    (deployed, kernels) = j.operations()
    assert deployed.gates and deployed.scope == {"restarted": ["decode"]}
    assert kernels.kernel == {"package": "pkg", "version": "1"}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"components": "prefill"}, "journal begin record has a wrong components"),
        ({"profile": ["p"]}, "journal begin record has a wrong profile"),
        ({"kind": "reboot"}, "unknown operation kind 'reboot'"),
        ({"user": None}, "journal begin record lacks user"),
        ({"type": "memo"}, "unknown journal record type 'memo'"),
    ],
)
def test_a_record_that_fails_its_type_is_named_and_the_rest_is_read(
    tmp_path: Path, change: dict[str, object], why: str
) -> None:
    j = Journal("box", directory=tmp_path, clock=FakeClock())
    first = j.begin(Kind.STOP)
    j.transition(first, Status.RUNNING)
    j.transition(first, Status.SUCCEEDED, running="")
    bad = {**json.loads(j.path.read_text().splitlines()[0]), "op": "s-2", **change}
    with j.path.open("a") as f:
        f.write(json.dumps(bad) + "\n")
    with pytest.raises(RecordError, match=why):
        parse_record(bad, "x")
    fresh = Journal("box", directory=tmp_path, clock=FakeClock())
    assert [o.op for o in fresh.operations()] == [first]  # the rest is read
    assert f"{fresh.path}:5: {why}" in fresh.warnings()[0]
    assert fresh.warnings()[-1].startswith("hint: look at it (`sed -n 5p")
    with pytest.raises(JournalError, match=f"{fresh.path}:5: {why}") as refused:
        fresh.begin(Kind.DEPLOY, profile={"name": "p"})
    assert "sed -n 5p" in str(refused.value.hint)


def test_the_typed_records_are_what_readers_get(tmp_path: Path) -> None:
    j = Journal("box", directory=tmp_path, clock=FakeClock())
    op = j.begin(Kind.STOP)
    begin, pending = records(j)
    assert isinstance(begin, BeginRecord) and begin.op == op and begin.kind is Kind.STOP
    assert isinstance(pending, StatusRecord) and pending.status is Status.PENDING
    assert j.tail_records(1) == [pending]
