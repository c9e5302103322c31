"""Every shipped runbook parses, with the CLI's real sub-commands, and reads like one."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.cli import COMMANDS
from dsv4ops.runbooks.catalogue import list_runbooks
from dsv4ops.runbooks.parse import load_runbook
from testing.runbooks import SHIPPED_RUNBOOKS

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
SHIPPED = list_runbooks(RUNBOOKS)
VERBS = set(COMMANDS) - {"runbook"}


def test_the_shipped_runbooks_are_the_listed_ones() -> None:
    assert sorted(p.stem for p in SHIPPED) == list(SHIPPED_RUNBOOKS)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_runbook_parses(path: Path) -> None:
    b = load_runbook(str(path), verbs=VERBS)
    assert b.title and b.summary
    assert any(s.commands for s in b.steps)
    assert all(s.title and len(s.title) <= 30 for s in b.steps), [s.title for s in b.steps]
    for c in [*b.rehearse, *(c for s in b.steps for c in s.commands)]:
        # Every command that talks to a target names it, so the text reads right when copied.
        if c.argv[1] in {"deploy", "rollback", "stop", "status", "canary", "journal", "twin"}:
            assert "{target}" in c.argv, c.display()
    # Each one ends by proving its outcome (a wait, a canary, or a record of the state).
    assert {"wait", "run"} & {s.action for s in b.steps[-3:]}


def test_decode_wedge_collects_diagnostics_before_the_restart() -> None:
    b = load_runbook(str(RUNBOOKS / "decode-wedge.md"), verbs=VERBS)
    assert [c.argv[1:3] for c in b.rehearse] == [("deploy", "overlap-on"), ("twin", "hazard")]
    actions = [s.action for s in b.steps]
    assert actions.index("diagnostics") < next(
        i for i, s in enumerate(b.steps) if s.needs_confirmation
    )
    assert [s.number for s in b.steps if s.needs_confirmation] == [5]
    assert not b.step(5).safe_to_repeat
    assert b.placeholders == set()


def test_overlap_ab_rolls_back_when_the_stress_fails() -> None:
    b = load_runbook(str(RUNBOOKS / "overlap-ab.md"), verbs=VERBS)
    stress, decide = b.step(4), b.step(5)
    assert stress.if_failed == "6" and decide.if_failed == "6" and decide.if_ok == "end"
    assert b.after(stress, stress.if_failed) is b.step(6)
