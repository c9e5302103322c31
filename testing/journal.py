"""Test helpers and doubles for `dsv4ops.journal` (one module per package area).

- FullDiskBackend: a journal file whose appends fail as on a full disk while `full` is set.
- gate_step: a deploy's canary gate journaled as the engine journals it (with its GateResult).
- records: every valid record of a journal, in order (the whole file parsed, after a read).
- fold, place_merged, judge, known_good, failed_gates: the full scan, the index's reference.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from dsv4ops.errors import JournalError
from dsv4ops.journal import knowngood as kg
from dsv4ops.journal import recordfile, rows
from dsv4ops.journal.gates import GateResult, GateSource, GateVerdict, canary_gate
from dsv4ops.journal.records import Judgement, Kind, Operation, fold_into
from dsv4ops.journal.schema import BeginRecord, MergeRecord, Record, RecordError, parse_record
from dsv4ops.journal.store import FileBackend, Journal


class FullDiskBackend(FileBackend):
    """The plain journal file; while `full`, an append fails as a full disk makes it fail, and
    `keep` (the fallback the store hands unwritten records to) takes them into `kept`."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.full = False
        self.kept: list[bytes] = []

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        if self.full:
            raise JournalError(f"cannot write journal {self.path}: No space left on device")
        super().append(data, lock_op=lock_op)

    def keep(self, data: bytes) -> Path:
        self.kept.append(data)
        return self.path.with_suffix(".kept")


def records(j: Journal) -> list[Record]:
    """Every valid record of `j` in order, as a read finds them (a target's record: its cache,
    synced by this read); torn and damaged lines are skipped (Journal.warnings says them)."""
    j.sync()
    parsed, _ = recordfile.parse(recordfile.read_bytes(str(j.path)))
    out: list[Record] = []
    for n, r in parsed:
        with contextlib.suppress(RecordError):
            out.append(parse_record(r, f"{j.path}:{n}"))
    return out


def gate_step(
    j: Journal, op: str, detail: str = "PASS", *, name: str = "canary: smoke", took: float = 1.0
) -> None:
    """Operation `op`'s canary gate step's end record as the engine writes it: its detail's words
    ("PASS ...", "INCONCLUSIVE, accepted as asked: ...", "verdict FAIL: ...") and the GateResult
    they say (journal/gates.py), for the commands `op` began with."""
    o = j.get(op)
    verdict = (
        GateVerdict.FAIL
        if detail.startswith("verdict FAIL")
        else GateVerdict.INCONCLUSIVE
        if detail.startswith("INCONCLUSIVE")
        else GateVerdict.PASS
    )
    source = GateSource.ROLLBACK if o.kind is Kind.ROLLBACK else GateSource.DEPLOY
    h = str((o.profile or {}).get("commands_hash") or "") or None
    g = canary_gate(verdict, [f"smoke: {verdict.value}"], True, source, op, h)
    phase = "failed" if verdict is GateVerdict.FAIL else "done"
    j.step(op, name, phase, detail=detail, duration_s=took, gate=replace(g, duration_s=took))


# -- the full scan: what every read did before the index, kept as the index's reference --------
# The shipped readers ask the index (journal/view.py: each row's own facts and three lookups);
# these answer the same by folding and judging the whole journal, so the property tests
# (tests/journal/index_test.py, knowngood_rows_test.py) hold the index equal to them on
# generated journals, and benchmarks/journal_scale.py times the full scan beside it.


def fold(records: Sequence[Record]) -> list[Operation]:
    """Operations in the order they began, each with its latest status applied."""
    return list(fold_into(records).values())


def place_merged(ops: list[Operation], records: Sequence[Record]) -> list[Operation]:
    """`ops` placed as the journal orders them (rows.place_by) after its merge records."""
    merged = {op for r in records if isinstance(r, MergeRecord) for op in r.ops}
    after_first_merge: set[str] = set()
    seen_merge = False
    for r in records:
        if isinstance(r, MergeRecord):
            seen_merge = True
        elif isinstance(r, BeginRecord) and seen_merge:
            after_first_merge.add(r.op)
    return [ops[k] for k in rows.place_by([(o.op, o.ts) for o in ops], merged, after_first_merge)]


def judge(ops: Sequence[Operation]) -> dict[str, Judgement]:
    """op id -> Judgement for every DEPLOY and ROLLBACK in `ops` (the journal, oldest first),
    by a full scan; the journal's index (journal/view.py) answers the same per row."""
    experiments = {o.op for o in ops if o.kind is Kind.EXPERIMENT}
    failed = failed_gates(ops)
    out: dict[str, Judgement] = {}
    good: dict[str, Judgement] = {}  # commands hash -> the best known-good judgement so far
    for o in ops:
        if o.kind not in (Kind.DEPLOY, Kind.ROLLBACK):
            continue
        j = _own(o, experiments, good)
        h = kg.commands_hash(o)
        if j.known_good and h in failed:
            j = kg.failed_judgement(o.op, failed[h])
        out[o.op] = j
        if j.known_good and h and (h not in good or good[h].rank < j.rank):
            good[h] = j
    return out


def known_good(
    ops: Sequence[Operation], judged: Mapping[str, Judgement] | None = None
) -> list[Operation]:
    """The known-good deployments in the order rollback offers them: every gate pass before
    every accepted INCONCLUSIVE, newest first within each. `judged`: judge(ops), when the caller
    already has it."""
    judged = judge(ops) if judged is None else judged
    newest_first = [o for o in reversed(ops) if o.op in judged and judged[o.op].known_good]
    return sorted(newest_first, key=lambda o: -judged[o.op].rank)  # stable: newest first kept


def failed_gates(ops: Sequence[Operation]) -> dict[str, str]:
    """commands hash -> which gate it FAILED (the first one), over the whole journal: the
    GateResults that failed (GateResult.failed) of every deploy, rollback and experiment."""
    out: dict[str, str] = {}
    for o in ops:
        if o.kind not in (Kind.DEPLOY, Kind.ROLLBACK, Kind.EXPERIMENT):
            continue
        for g in o.gates:
            if g.failed:
                for h, what in _failed_commands(o, g, ops):
                    out.setdefault(h, what)
    return out


def _failed_commands(
    o: Operation, g: GateResult, ops: Sequence[Operation]
) -> list[tuple[str, str]]:
    """(commands hash, which gate) for a failed gate `g` that operation `o` recorded."""
    h, what = kg.own_failure(o, g)
    if h is not None:
        return [(h, what)]
    if o.kind is not Kind.EXPERIMENT:
        return []
    # A migrated A/B gate names no commands: its experiment's B blocks ran them.
    return [
        (h, kg.legacy_ab_failure(what, o.op, d.profile_name))
        for d in ops
        if (h := kg.commands_hash(d)) and kg.arm_of(d, o.op) == "B"
    ]


def _own(o: Operation, experiments: set[str], good: dict[str, Judgement]) -> Judgement:
    """The judgement of `o` by its own records (and, for a rollback, what it restored)."""
    pre, rank, why = kg.own_facts(o)
    if pre:
        return Judgement(o.op, rank, why)
    arm = next((e for e in experiments if kg.arm_of(o, e)), None)
    if arm is not None:
        return kg.arm_judgement(o.op, arm)
    if rank == kg.INHERITS:
        return kg.inherited(o.op, good.get(kg.commands_hash(o) or ""))
    return Judgement(o.op, rank, why)
