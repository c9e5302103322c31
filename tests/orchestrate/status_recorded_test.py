"""What status reads of a recorded deployment with a damaged field (orchestrate/status_recorded.py):
it never raises; it names every damaged field once, rebuilds what it observes by when only
fields it does not need are damaged, and says what it cannot show when one it needs is. The
unreachable target's report (the journal alone) names the damage too, and exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.cli.status import render_offline
from dsv4ops.journal.backend import FileBackend
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.status import journal_status
from dsv4ops.orchestrate.status_recorded import recorded_view
from dsv4ops.timings import STOP_GRACE_S
from dsv4ops.usecases.status import with_word
from testing.journal import gate_step
from testing.orchestrate import make_deployment


def _deployed(tmp_path: Path, edit: dict[tuple[str, str], object]) -> tuple[Journal, str]:
    """A journal whose known-good deploy recorded components edited as `edit` says."""
    d = make_deployment("baseline")
    components = d.component_records()
    for (name, key), value in edit.items():
        next(c for c in components if c["name"] == name)[key] = value
    j = Journal("t", backend=FileBackend(tmp_path / "t.jsonl"))
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=components)
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return j, op


def test_fields_status_does_not_need_are_named_and_hide_nothing(tmp_path: Path) -> None:
    j, op = _deployed(
        tmp_path, {("decode", "stop_grace_s"): "abc", ("router", "key_from"): "ROUTER_KEY"}
    )
    view = recorded_view(j)
    assert view.running and view.deployed is not None and view.deployed is view.last
    assert view.deployed.component("decode").stop_grace_s == STOP_GRACE_S  # never used to stop
    assert [(e.op, e.key) for e in view.damage] == [
        (op, "components.decode.stop_grace_s"),
        (op, "components.router.key_from"),
    ]
    assert view.not_shown() == [] and view.pd_timeouts() is not None


def test_a_field_status_needs_is_named_with_what_it_kept_from_view(tmp_path: Path) -> None:
    j, op = _deployed(tmp_path, {("decode", "port"): "8100", ("prefill", "stop_grace_s"): -5})
    view = recorded_view(j)
    assert view.running and view.deployed is None and view.last is None
    assert [e.key for e in view.damage] == [
        "components.prefill.stop_grace_s",
        "components.decode.port",
    ]
    (line,) = view.not_shown()
    assert "health" in line and "(components.decode.port is damaged)" in line


def test_the_unreachable_target_s_report_names_the_damage_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    j, op = _deployed(tmp_path, {("decode", "stop_grace_s"): "30s"})
    report = journal_status(j, target="t", record={"source": "cache", "age_s": 1.0})
    with_word(report)
    assert (report["status"], report["exit"]) == ("UNKNOWN", 2)
    (damage,) = report["recorded_damage"]
    assert (damage["op"], damage["key"], damage["value"]) == (
        op,
        "components.decode.stop_grace_s",
        "30s",
    )
    lines = render_offline(report)
    assert f"damaged record: journal operation {op} records components.decode.stop_grace_s" in (
        "\n".join(lines)
    )
    assert any(ln.startswith("  hint: mend `stop_grace_s` of the decode") for ln in lines)
