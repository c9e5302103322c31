"""The one known-good rule (dsv4ops/journal/knowngood.py), judged over journals as the engine
and `dsv4ops ab` write them, and over a journal an older version wrote (re-judged on read)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.errors import JournalError
from dsv4ops.journal.gates import GateResult, GateSource, GateVerdict
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.schema import BeginRecord
from dsv4ops.journal.store import FileBackend, Journal
from dsv4ops.jsontypes import JSONObject
from dsv4ops.orchestrate.restore import rollback_target
from testing.clock import FakeClock
from testing.journal import gate_step, judge, known_good, records


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


def deploy(
    j: Journal,
    name: str,
    *,
    gate: str | None = "PASS",
    kind: Kind = Kind.DEPLOY,
    status: Status = Status.SUCCEEDED,
    reason: str | None = None,
    scope: JSONObject | None = None,
    proven: bool = True,
    hash_: str | None = None,
) -> str:
    """One operation as the engine journals it; `gate` is the canary step's detail (None: no
    canary step, as `--no-canary` journals it; "verdict FAIL: ..." a failed gate)."""
    op = j.begin(
        kind,
        profile={
            "name": name,
            "commands_hash": hash_ or f"h-{name}",
            "git_commit": f"c0ffee{name}",
        },
        components=[{"name": "prefill", "argv": ["python"]}],
        reason=reason,
        scope=scope,
    )
    j.transition(op, Status.RUNNING)
    if gate is not None and gate.startswith("skipped"):
        j.step(op, "canary: smoke + the suites the change calls for", "done", detail=gate)
    elif gate is not None:
        gate_step(j, op, gate, name="canary: smoke + the suites the change calls for")
    ok = status is Status.SUCCEEDED
    j.transition(op, status, running=op if ok else "", known_good=ok and proven)
    return op


def why(j: Journal, op: str) -> str:
    return j.judged()[op].why


def test_a_gated_whole_unit_deploy_is_known_good_and_no_canary_is_not(journal: Journal) -> None:
    good = deploy(journal, "baseline")
    blind = deploy(journal, "overlap-on", gate=None)
    skipped = deploy(journal, "multi", gate="skipped (no canary available)")
    assert journal.judged()[good].known_good and "canary gate PASS" in why(journal, good)
    for op in (blind, skipped):
        assert not journal.judged()[op].known_good
        assert (
            why(journal, op)
            == "not known-good: no canary gate ran (--no-canary, or an experiment's deploy)"
        )
    assert [o.op for o in journal.known_good()] == [good]
    assert rollback_target(journal, None).op == good  # multi runs: baseline is offered


def test_an_accepted_inconclusive_ranks_below_an_older_pass(journal: Journal) -> None:
    passed = deploy(journal, "a")
    accepted = deploy(journal, "b", gate="INCONCLUSIVE, accepted as asked: smoke: INCONCLUSIVE")
    newer = deploy(journal, "c")
    assert journal.judged()[accepted].known_good and "below a pass" in why(journal, accepted)
    assert [o.op for o in journal.known_good()] == [newer, passed, accepted]
    assert rollback_target(journal, None).op == passed  # c runs; a's pass outranks b


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"status": Status.ROLLED_BACK}, "it failed and was rolled back"),
        ({"status": Status.FAILED}, "it failed"),
        ({"scope": {"restarted": ["router"]}}, "a partial restart (router) is not a proven unit"),
        ({"proven": False}, "never proven by generations through the router"),
    ],
)
def test_never_a_failed_partial_or_unproven_deploy(
    journal: Journal, kw: dict[str, Any], words: str
) -> None:
    op = deploy(journal, "x", **kw)
    assert not journal.judged()[op].known_good and words in why(journal, op)


def test_an_interrupted_deploy_is_not_known_good_running_or_abandoned(journal: Journal) -> None:
    op = journal.begin(Kind.DEPLOY, profile={"name": "x"}, components=[{"name": "decode"}])
    journal.transition(op, Status.RUNNING)
    assert "never ended (RUNNING" in why(journal, op)
    journal.transition(op, Status.ABANDONED)
    assert why(journal, op) == "not known-good: it was interrupted and abandoned"


def test_commands_that_failed_a_gate_anywhere_are_never_offered_but_can_be_named(
    journal: Journal,
) -> None:
    first = deploy(journal, "overlap-on")  # passed once (a quiet day) ...
    deploy(
        journal, "overlap-on", gate="verdict FAIL: abort_cascade: FAIL", status=Status.ROLLED_BACK
    )
    base = deploy(journal, "baseline")  # ... failed the next time: never offered again
    assert why(journal, first).startswith("not known-good: its commands failed the canary gate of")
    assert journal.known_good()[0].op == base and len(journal.known_good()) == 1
    with pytest.raises(Exception, match="no earlier known-good"):
        rollback_target(journal, None)
    assert rollback_target(journal, first).op == first  # named with --to: the operator's call
    assert rollback_target(journal, "c0ffeeoverlap").op == first  # by its git revision too


def test_an_experiment_s_arms_are_never_known_good_and_b_s_failed_gate_sticks(
    journal: Journal,
) -> None:
    base = deploy(journal, "base")
    b_before = deploy(journal, "b")  # B was known-good before the A/B
    exp = journal.begin(Kind.EXPERIMENT, profile={"name": "base vs b", "a": "base", "b": "b"})
    journal.transition(exp, Status.RUNNING)
    blocks = [
        deploy(journal, name, gate=None, reason=f"experiment {exp}: block {i} ({arm})")
        for i, (name, arm) in enumerate([("base", "A"), ("b", "B")])
    ]
    wedged = GateResult(
        "abort_cascade", GateVerdict.FAIL, GateSource.AB_GATE, blocks[1], "h-b", ("wedged",)
    )
    journal.step(exp, "gate abort-cascade on B", "failed", detail="wedged", gate=wedged)
    left = deploy(journal, "base", gate=None, reason=f"experiment {exp}: leave the box on A")
    journal.transition(exp, Status.SUCCEEDED)
    judged = journal.judged()
    assert all(f"a block of A/B experiment {exp}" in judged[b].why for b in blocks)
    assert (
        f"the gate abort_cascade on B of experiment {exp} (B: {blocks[1]})" in judged[b_before].why
    )
    assert not judged[left].known_good and "no canary gate ran" in judged[left].why
    assert [o.op for o in journal.known_good()] == [base]
    with pytest.raises(Exception, match="no earlier known-good"):
        rollback_target(journal, None)  # base runs (the same commands); b is never offered


def test_a_rollback_inherits_the_known_good_of_what_it_restored_and_not_of_what_was_named(
    journal: Journal,
) -> None:
    base = deploy(journal, "base")
    blind = deploy(journal, "blind", gate=None)
    back = deploy(journal, "base", kind=Kind.ROLLBACK, gate=None)
    named = deploy(journal, "blind", kind=Kind.ROLLBACK, gate=None)  # `rollback --to` blind
    judged = journal.judged()
    assert judged[back].known_good and f"restored the commands of {base}" in judged[back].why
    assert not judged[blind].known_good and not judged[named].known_good
    assert "never known-good (named with --to)" in judged[named].why


def test_a_journal_written_before_the_rule_is_re_judged_on_read(tmp_path: Path) -> None:
    """An older dsv4ops marked every proven whole-unit deploy known-good: a --no-canary deploy
    and an A/B's blocks too. Read now, they are judged by the rule, and `journal` says why."""
    path = tmp_path / "old.jsonl"
    lines: list[str] = []

    def rec(**r: object) -> None:
        lines.append(
            json.dumps(
                {"v": 1, "ts": f"2026-11-0{len(lines) // 10 + 1}T00:00:{len(lines):02d}Z", **r}
            )
        )

    def old_deploy(
        op: str, name: str, steps: list[tuple[str, str, str]], reason: str | None = None
    ) -> None:
        rec(
            type="begin",
            op=op,
            kind="deploy",
            user="alice@ops",
            reason=reason,
            profile={"name": name, "commands_hash": f"h-{name}"},
            components=[{"name": "decode"}],
        )
        rec(type="status", op=op, status="PENDING")
        rec(type="status", op=op, status="RUNNING")
        for name_, phase, detail in steps:
            rec(type="step", op=op, name=name_, phase=phase, detail=detail)
        rec(type="status", op=op, status="SUCCEEDED", running=op, known_good=True)

    probe = ("end-to-end probe", "done", "2 generations through the router, content checked")
    old_deploy(
        "d-1",
        "baseline",
        [probe, ("canary: smoke + the suites the change calls for", "done", "PASS (smoke: PASS)")],
    )
    old_deploy("d-2", "overlap-on", [probe])  # --no-canary
    rec(
        type="begin",
        op="experiment-3",
        kind="experiment",
        user="alice@ops",
        profile={"name": "baseline vs overlap-on", "a": "baseline", "b": "overlap-on"},
    )
    rec(type="status", op="experiment-3", status="RUNNING")
    old_deploy("d-4", "overlap-on", [probe], reason="experiment experiment-3: block 0 (B)")
    rec(
        type="step",
        op="experiment-3",
        name="gate abort-cascade on B",
        phase="failed",
        detail="wedge",
    )
    rec(type="status", op="experiment-3", status="SUCCEEDED")
    path.write_text("\n".join(lines) + "\n")
    ops = Journal("old", backend=_file(path)).operations()
    judged = judge(ops)
    assert [o.op for o in known_good(ops)] == ["d-1"]
    assert "no canary gate ran" in judged["d-2"].why
    assert "a block of A/B experiment experiment-3" in judged["d-4"].why
    assert all(o.proven for o in ops if o.kind is Kind.DEPLOY)  # what the old mark did mean


def _file(path: Path) -> FileBackend:
    return FileBackend(path)


FIXTURES = Path(__file__).parent / "fixtures"


def test_a_journal_of_gate_steps_is_judged_as_the_version_that_wrote_it(tmp_path: Path) -> None:
    """pre_issue39_gates.jsonl was written by the dsv4ops before GateResults (gate steps only:
    pass, accepted INCONCLUSIVE, FAIL, --no-canary, skipped, partial, rollbacks, three A/Bs whose
    B failed a gate, its measured sweep, and a gate that could not judge B), beside what that
    version judged (.judged.json). Migrated on read (the one migrator, journal/schema.py), it is judged the same:
    every rank, the order rollback offers, every reason (an A/B gate's reason reworded only)."""
    path = tmp_path / "old.jsonl"
    path.write_bytes((FIXTURES / "pre_issue39_gates.jsonl").read_bytes())
    then = json.loads((FIXTURES / "pre_issue39_gates.judged.json").read_text())
    for journal in (Journal("old", backend=_file(path)), Journal("old", backend=_file(path))):
        now = journal.judged()  # the first read builds the cache, the second reads it
        assert {op: j.rank for op, j in now.items()} == {
            op: rank for op, (rank, _) in then["judged"].items()
        }
        assert [o.op for o in journal.known_good()] == then["known_good"]
        for op, (_, why) in then["judged"].items():
            assert now[op].why == why
    ops = Journal("old", backend=_file(path)).operations()
    begins = [r for r in records(Journal("old", backend=_file(path))) if isinstance(r, BeginRecord)]
    assert begins and all(b.gates is None for b in begins)  # none written by this version
    gates = {o.op: o.gates for o in ops}  # all migrated by the one migrator (schema.migrate)
    (accepted,) = [g for gs in gates.values() for g in gs if g.accepted]
    assert accepted.verdict is GateVerdict.INCONCLUSIVE and accepted.source is GateSource.DEPLOY
    ab = [g for o in ops if o.kind is Kind.EXPERIMENT for g in gates[o.op]]
    assert [(g.suite, g.verdict, g.source) for g in ab] == [
        ("abort-cascade", GateVerdict.FAIL, GateSource.AB_GATE),
        ("sweep", GateVerdict.FAIL, GateSource.AB_BLOCK),
        ("corruption", GateVerdict.INCONCLUSIVE, GateSource.AB_GATE),
    ]
    assert all(g.failed and g.commands_hash is None for g in ab)


def test_known_good_is_decided_by_gate_results_never_by_a_step_s_name_or_words(
    journal: Journal,
) -> None:
    """An operation this version began records its gates as GateResults: a step named like the
    canary saying PASS proves nothing, one saying `verdict FAIL` fails nothing, and a gate's
    result counts whatever its step is called."""
    failed = deploy(journal, "looks-failed", gate=None)
    journal.step(failed, "canary: smoke", "failed", detail="verdict FAIL: made up")
    looks = deploy(journal, "looks-passed", gate=None)
    journal.step(looks, "canary: smoke", "done", detail="PASS (smoke: PASS)")
    odd = deploy(journal, "odd-name", gate=None)
    passed = GateResult("smoke", GateVerdict.PASS, GateSource.DEPLOY, odd, "h-odd-name")
    journal.step(odd, "whatever it is called", "done", detail="no words", gate=passed)
    again = deploy(journal, "looks-failed")  # its commands never failed a gate
    judged = journal.judged()
    assert "no canary gate ran" in judged[looks].why and not judged[looks].known_good
    assert judged[odd].known_good and judged[again].known_good, judged[again].why
    assert [o.op for o in journal.known_good()][:2] == [again, odd]
    assert [g.to_record()["verdict"] for g in journal.get(odd).gates] == ["PASS"]


def test_a_gate_no_one_can_read_is_a_damaged_line_never_a_gate_that_did_not_run(
    journal: Journal,
) -> None:
    op = deploy(journal, "x", gate=None)
    record = {"v": 1, "ts": "2026-12-06T00:00:00Z", "type": "step", "op": op, "name": "canary"}
    bad = {**record, "phase": "failed", "gate": {"suite": "smoke", "verdict": "MAYBE"}}
    with journal.path.open("a") as f:
        f.write(json.dumps(bad) + "\n")
    assert any("holds no readable gate" in w for w in journal.warnings())
    with pytest.raises(JournalError, match="holds no readable gate"):
        journal.begin(Kind.DEPLOY, profile={"name": "y"})


def test_the_json_judgement_carries_the_gate_s_verdict_as_the_enum_s_value(
    journal: Journal,
) -> None:
    """`journal`, `status` and `rollback --dry-run` print "INCONCLUSIVE accepted" off
    `known_good_gate` (the enum's value, one place), never off the words of the why; each gate
    is printed by GateResult.label."""
    from dsv4ops.journal.records import judged_json
    from dsv4ops.usecases.journal import accepted_inconclusive, gate_labels

    passed = deploy(journal, "a")
    accepted = deploy(journal, "b", gate="INCONCLUSIVE, accepted as asked: slow")
    failed = deploy(journal, "c", gate="verdict FAIL: wedged", status=Status.ROLLED_BACK)
    judged = journal.judged()
    docs = {op: judged_json(judged[op]) for op in (passed, accepted, failed)}
    assert [d["known_good_gate"] for d in docs.values()] == ["PASS", "INCONCLUSIVE", None]
    assert [accepted_inconclusive(d) for d in docs.values()] == [False, True, False]
    assert judged_json(None, "not a deployment")["known_good_why"] == "not a deployment"
    summary = journal.get(accepted).summary(judged[accepted])
    assert gate_labels(summary) == ["smoke INCONCLUSIVE accepted h-b"]
    assert summary["known_good_gate"] == GateVerdict.INCONCLUSIVE.value
