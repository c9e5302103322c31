"""Every shipped runbook parses, with the CLI's real sub-commands, and reads like one."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.cli import COMMANDS
from dsv4ops.runbooks.parse import list_runbooks, load_runbook

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
SHIPPED = list_runbooks(RUNBOOKS)
VERBS = set(COMMANDS) - {"runbook"}


def test_the_four_runbooks_are_shipped() -> None:
    assert {p.stem for p in SHIPPED} == {
        "bootstrap-degradation",
        "decode-wedge",
        "flag-change",
        "tool-call-corruption",
    }


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_runbook_parses(path: Path) -> None:
    b = load_runbook(str(path), verbs=VERBS)
    assert b.title and b.summary
    assert any(s.commands for s in b.steps)
    assert all(s.title and len(s.title) <= 30 for s in b.steps), [s.title for s in b.steps]
    for c in [*b.rehearse, *(c for s in b.steps for c in s.commands)]:
        # Every command that talks to a target names it, so the text reads right when copied.
        if c.argv[1] in {"deploy", "rollback", "stop", "status", "canary", "journal"}:
            assert "{target}" in c.argv, c.display()


def test_decode_wedge_rehearses_and_asks_before_the_restart() -> None:
    b = load_runbook(str(RUNBOOKS / "decode-wedge.md"), verbs=VERBS)
    assert [c.argv[1:3] for c in b.rehearse] == [
        ("deploy", "baseline"),
        ("deploy", "overlap-on"),
        ("canary", "--target"),
    ]
    assert b.rehearse[-1].expect == {2}
    assert [s.number for s in b.steps if s.needs_confirmation] == [3]
    assert b.placeholders == set()
