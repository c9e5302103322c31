"""The known-good rule as index rows (issue 39 item 4, the SQL-first index's design): what
the full scan (testing/journal.py: judge) decides of a deploy or rollback splits into facts of
its own records (kept in its row when it is folded, never changed by another operation's
records) and lookups made when it is read: whether the experiment its reason names exists, the first gate that failed its commands,
and for a rollback that ran no gate the best known-good of its commands before it. Appends then
never re-judge a row and a merge only re-places them: no checkpoint. `Rows` is that design in
memory (one SQL query per lookup in a cache); the property holds it equal to the full scan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops.journal import knowngood as kg
from dsv4ops.journal import recordfile
from dsv4ops.journal.gates import GATES_RECORDED, GateSource
from dsv4ops.journal.records import NOT, Judgement, Kind, Operation, Status
from dsv4ops.journal.schema import Record, RecordError, parse_record
from testing import journal as full_scan
from tests.journal.index_test import journals

_JUDGED = (Kind.DEPLOY, Kind.ROLLBACK)


@dataclass(frozen=True)
class Failed:
    """A failed gate an operation recorded: the commands (None: a migrated A/B gate, whose
    experiment's B blocks ran them) and which gate, in the rule's words."""

    commands: str | None
    what: str


@dataclass(frozen=True)
class Row:
    """One operation's row: only its own records decide it."""

    op: str
    kind: Kind
    commands: str | None
    profile: str | None
    pre: str | None  # why not by its status, components or scope
    block_of: str | None  # the experiment its reason names as a block (A or B)
    arm: str | None
    post: Judgement | None  # by its proof and gate (None: a gateless rollback, it inherits)
    failed: tuple[Failed, ...]


def _pre(o: Operation) -> str | None:
    if o.status is not Status.SUCCEEDED:
        return kg._ended(o)
    if not o.components:
        return "it recorded no deployment"
    if o.scope is not None:
        restarted = ", ".join(o.scope.get("restarted") or [])
        return f"a partial restart ({restarted}) is not a proven unit"
    return None


def _post(o: Operation) -> Judgement | None:
    if not o.proven:
        why = "not known-good: the unit was never proven by generations through the router"
        return Judgement(o.op, NOT, why)
    _, rank, why = kg.own_facts(o)
    return None if rank == kg.INHERITS else Judgement(o.op, rank, why)


def _failed(o: Operation) -> tuple[Failed, ...]:
    out = []
    for g in (g for g in o.gates if g.failed):
        if o.kind is not Kind.EXPERIMENT:
            what = f"the canary gate of {o.op} ({o.profile_name or '-'})"
            out += [Failed(g.commands_hash, what)] if g.commands_hash else []
        elif g.commands_hash:
            out.append(
                Failed(g.commands_hash, f"the {kg._ab_gate(g)} of experiment {o.op} (B: {g.op})")
            )
        else:
            out.append(Failed(None, kg._ab_gate(g)))
    return tuple(out)


def row(o: Operation) -> Row:
    reason = o.reason or ""
    block_of = None
    if o.kind is Kind.DEPLOY and reason.startswith("experiment ") and ": block " in reason:
        block_of = reason.removeprefix("experiment ").split(": block ", 1)[0]
    judged = o.kind in _JUDGED
    return Row(
        o.op,
        o.kind,
        kg.commands_hash(o),
        o.profile_name,
        _pre(o) if judged else None,
        block_of,
        kg.arm_of(o, block_of) if block_of is not None else None,
        _post(o) if judged else None,
        _failed(o) if o.kind in (*_JUDGED, Kind.EXPERIMENT) else (),
    )


class Rows:
    """The rows in the journal's order and the lookups made when one is judged."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.pos = {r.op: i for i, r in enumerate(rows)}
        self.experiments = {r.op for r in rows if r.kind is Kind.EXPERIMENT}
        # commands -> ((the failing operation's place, which of its gates, its block's), which
        # gate): the first wins
        self.failed: dict[str, tuple[tuple[int, int, int], str]] = {}
        for i, r in enumerate(rows):
            for g, f in enumerate(r.failed):
                if f.commands is not None:
                    self._fail(f.commands, (i, g, -1), f.what)
                    continue
                for j, d in enumerate(rows):
                    if d.block_of == r.op and d.arm == "B" and d.commands:
                        what = f"the {f.what} of experiment {r.op} ({d.profile or '-'})"
                        self._fail(d.commands, (i, g, j), what)

    def _fail(self, h: str, at: tuple[int, int, int], what: str) -> None:
        if h not in self.failed or at < self.failed[h][0]:
            self.failed[h] = (at, what)

    def judge(self, op: str) -> Judgement:
        i = self.pos[op]
        r = self.rows[i]
        if r.pre is not None:
            return Judgement(op, NOT, f"not known-good: {r.pre}")
        if r.block_of in self.experiments and r.arm is not None:
            why = (
                f"a block of A/B experiment {r.block_of} (an experiment's arm is never known-good)"
            )
            return Judgement(op, NOT, f"not known-good: {why}")
        j = r.post or self._inherited(r, i)
        if j.known_good and r.commands in self.failed:
            return Judgement(
                op, NOT, f"not known-good: its commands failed {self.failed[r.commands][1]}"
            )
        return j

    def _inherited(self, r: Row, i: int) -> Judgement:
        """A gateless rollback: the best known-good of its commands before it (the first of the
        best rank), unless they failed a gate."""
        best = None
        if r.commands and r.commands not in self.failed:
            for d in self.rows[:i]:
                j = self.judge(d.op) if d.commands == r.commands and d.kind in _JUDGED else None
                if j is not None and j.known_good and (best is None or j.rank > best.rank):
                    best = j
        if best is None:
            why = (
                "it restored commands that were never known-good (named with --to) and ran no gate"
            )
            return Judgement(r.op, NOT, f"not known-good: {why}")
        restored = best.why.split(": ", 1)[-1]
        return Judgement(
            r.op, best.rank, f"known-good: restored the commands of {best.op} ({restored})"
        )


def _operations(lines: list[bytes]) -> list[Operation]:
    parsed, _ = recordfile.parse(b"".join(lines))
    records: list[Record] = []
    for n, r in parsed:
        try:
            records.append(parse_record(r, str(n)))
        except RecordError:
            continue
    return full_scan.place_merged(full_scan.fold(records), records)


_KINDS = ["deploy", "deploy", "deploy", "rollback", "rollback", "experiment"]
_HASHES = ["h1", "h2", "h3"]
_VERDICTS = ["PASS"] * 6 + ["FAIL", "INCONCLUSIVE"]  # failed commands are never offered: rarer
_LEGACY = {  # an older version's gate steps: (name, phase, detail)
    "deploy": [("canary", "done", "PASS"), ("canary", "failed", "verdict FAIL"),
               ("canary", "done", "INCONCLUSIVE, accepted as asked")],
    "experiment": [("gate smoke on B", "failed", "FAIL"),
                   ("gate speed on B (measured)", "failed", "slower"),
                   ("gate smoke on B", "failed", "could not judge B")],
}  # fmt: skip


def _gates(draw: st.DrawFn, base: dict[str, Any], op: str, kind: str, new: bool) -> list[Any]:
    """Gate steps of one operation: GateResults (`new`) or an older version's gate steps."""
    out: list[Any] = []
    for _ in range(draw(st.integers(0, 2))):
        if not new:
            legacy = _LEGACY.get(kind, _LEGACY["deploy"])
            name, phase, detail = draw(st.sampled_from(legacy[:1] * 4 + legacy))
            out.append({**base, "type": "step", "name": name, "phase": phase, "detail": detail})
            continue
        sources = ["ab-gate", "ab-block"] if kind == "experiment" else ["deploy", "rollback"]
        gate: dict[str, Any] = {
            "suite": "smoke",
            "verdict": draw(st.sampled_from(_VERDICTS)),
            "source": draw(st.sampled_from(sources + [GateSource.RECOVER.value])),
            "op": op if kind != "experiment" and draw(st.integers(0, 4)) > 0 else "d-0",
            "commands_hash": draw(st.sampled_from([*_HASHES, None])),
            "reasons": [],
            "accepted": draw(st.booleans()),
        }
        out.append({**base, "type": "step", "name": "gate", "phase": "done", "gate": gate})
    return out


def _operation(draw: st.DrawFn, i: int, n: int) -> list[Any]:
    """One operation's records, most of them whole units that served (the rule's hard cases)."""
    kind = draw(st.sampled_from(_KINDS))
    op = f"{kind[0]}-{i}"
    base = {"v": 1, "ts": f"2026-12-01T00:00:{draw(st.integers(0, 20)):02d}Z", "op": op}
    new = draw(st.integers(0, 3)) > 0
    begin = {
        **base,
        "type": "begin",
        "kind": kind,
        "user": "u",
        "gates": GATES_RECORDED if new else None,
    }
    begin["profile"] = {"name": op, "commands_hash": draw(st.sampled_from(_HASHES))}
    begin["components"] = [{"name": "decode"}] if draw(st.integers(0, 9)) else []
    if kind == "deploy" and draw(st.booleans()):  # a block of an experiment, maybe begun later
        arm = draw(st.sampled_from(["(A)", "(B)"]))
        begin["reason"] = f"experiment e-{draw(st.integers(0, n))}: block 1 {arm}"
    if not draw(st.integers(0, 9)):
        begin["scope"] = {"restarted": ["decode"]}
    end = draw(st.sampled_from(["SUCCEEDED"] * 4 + ["FAILED", "ROLLED_BACK", "RUNNING"]))
    last: dict[str, Any] = {**base, "type": "status", "status": end}
    if end == "SUCCEEDED" and draw(st.integers(0, 4)) > 0:
        last["known_good"] = True
    return [begin, *_gates(draw, base, op, kind, new), last]


@st.composite
def judged_journals(draw: st.DrawFn) -> list[bytes]:
    """Deploys, rollbacks and experiments that mostly served and passed or failed gates, of three
    commands, blocks naming experiments begun before or after them, merges that re-place them."""
    n = draw(st.integers(1, 12))
    out: list[bytes] = []
    for i in range(n):
        out += [
            recordfile.encode({k: v for k, v in r.items() if v is not None})
            for r in _operation(draw, i, n)
        ]
        if i and not draw(st.integers(0, 4)):
            ops = [f"{k[0]}-{j}" for j in range(i) for k in ("deploy", "rollback", "experiment")]
            merged = draw(st.lists(st.sampled_from(ops), min_size=1, max_size=2))
            merge = {
                "v": 1,
                "ts": "2026-12-01T00:00:30Z",
                "type": "merge",
                "op": f"m-{i}",
                "user": "u",
                "ops": merged,
            }
            out.append(recordfile.encode(merge))
    return out


def _check(lines: list[bytes]) -> None:
    ops = _operations(lines)
    rows = Rows([row(o) for o in ops])
    assert {o.op: rows.judge(o.op) for o in ops if o.kind in _JUDGED} == full_scan.judge(ops)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(judged_journals())
def test_the_rule_as_rows_judges_what_knowngood_judges(lines: list[bytes]) -> None:
    _check(lines)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(journals())
def test_the_rule_as_rows_judges_any_journal_as_knowngood_does(lines: list[bytes]) -> None:
    _check(lines)  # the index tests' journals: every kind, torn lines, stray records
