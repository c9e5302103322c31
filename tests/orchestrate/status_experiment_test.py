"""`status` while an A/B experiment runs: the deploy nested in it is in progress, not interrupted
(the experiment holds the deploy lock for it); once the experiment's holder is dead, both are."""

from __future__ import annotations

from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.attention import attention_notes
from dsv4ops.remote.results import LockInfo


def _flying(journal: Journal) -> tuple[str, str]:
    exp = journal.begin(Kind.EXPERIMENT, profile={"name": "baseline vs overlap-on"})
    journal.transition(exp, Status.RUNNING)
    journal.step(exp, "block 1 B overlap-on", "start")
    dep = journal.begin(Kind.DEPLOY, profile={"name": "overlap-on"}, reason=f"experiment {exp}")
    journal.transition(dep, Status.RUNNING)
    journal.step(dep, "start decode", "start")
    return exp, dep


def test_a_deploy_nested_in_a_live_experiment_is_in_progress() -> None:
    journal = Journal("twin-local")
    exp, dep = _flying(journal)
    notes = attention_notes(journal, LockInfo({"op_id": exp, "pid": 1}, stale=False))
    assert notes == [
        f"experiment {exp} of baseline vs overlap-on is in progress (during 'block 1 B overlap-on')",
        f"deploy {dep} of overlap-on is in progress (during 'start decode', within experiment {exp})",
    ]


def test_once_the_experiments_holder_is_dead_both_were_interrupted() -> None:
    journal = Journal("twin-local")
    exp, dep = _flying(journal)
    notes = attention_notes(journal, LockInfo({"op_id": exp, "pid": 1}, stale=True))
    assert len(notes) == 2 and all("was interrupted" in n and "--recover" in n for n in notes)
