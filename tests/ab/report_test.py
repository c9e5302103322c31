"""report.json holds everything, report.md leads with the decision, PNGs come with matplotlib."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from dsv4ops.ab.analysis import analyse
from dsv4ops.ab.decision import GateResult, decide
from dsv4ops.ab.model import Arm, BlockResult
from dsv4ops.ab.report import write_report
from dsv4ops.ab.schedule import counterbalanced
from dsv4ops.profiles.buckets import resolve_buckets
from testing.ab import ArmModel, TwinBlocks

STEP8 = resolve_buckets("step8", tp_size=4, max_running_requests=96)
STEP4 = resolve_buckets("step4:40-96", tp_size=4, max_running_requests=96)
SCHEDULE = counterbalanced(12)


@pytest.fixture(scope="module")
def blocks() -> list[BlockResult]:
    arms: dict[Arm, ArmModel] = {
        "A": ArmModel("step8", tuple(STEP8)),
        "B": ArmModel("step4", tuple(STEP4)),
    }
    return TwinBlocks(arms, concurrencies=(48, 56, 57, 60), steps=50, seed=1).run(SCHEDULE)


def _write(
    directory: Path, blocks: list[BlockResult], gates: list[GateResult], **kw: object
) -> list[Path]:
    an = analyse(blocks, planned=len(SCHEDULE))
    return write_report(
        directory,
        a="step8",
        b="step4",
        schedule=SCHEDULE,
        blocks=blocks,
        analysis=an,
        gates=gates,
        decision=decide(an, gates),
        buckets={"A": STEP8, "B": STEP4},
        experiment_op="op-ab-1",
        **kw,  # type: ignore[arg-type]
    )


def test_the_report_holds_every_block_and_leads_with_the_decision(
    tmp_path: Path, blocks: list[BlockResult]
) -> None:  # noqa: ANN001
    gates = [GateResult("sweep", "B", True, "curve smooth, 0 errors")]
    written = _write(tmp_path, blocks, gates)
    names = {p.name for p in written}
    assert {"report.json", "report.md", "curves.png", "blocks.png", "buckets.png"} <= names
    for p in written:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = json.loads((tmp_path / "report.json").read_text())
    assert [BlockResult.from_record(x) for x in r["blocks"]] == blocks
    assert r["schedule"] == SCHEDULE and r["partial"] is False and r["experiment_op"] == "op-ab-1"
    assert r["decision"]["winner"] == "B" and r["gates"][0]["suite"] == "sweep"
    by = {(v["concurrency"], v["metric"]): v for v in r["analysis"]["verdicts"]}
    assert by[(57, "output_tok_s")]["verdict"] == "better"  # the 56 -> 57 cliff of step-8, smoothed
    assert by[(56, "output_tok_s")]["verdict"] == "equivalent"  # both ladders have a 56 graph
    md = (tmp_path / "report.md").read_text().splitlines()
    assert md[0] == "# A/B: step8 (A) vs step4 (B)" and md[2].startswith(
        "**Decision: B (step4).** B wins"
    )
    text = "\n".join(md)
    order = [
        text.index(h)
        for h in (
            "**Decision",
            "## Per metric",
            "## Drift",
            "## Correctness gates",
            "## Blocks in time order",
        )
    ]
    assert order == sorted(order)
    assert "| 11 | A | step8 |" in text and "sweep: passed (curve smooth, 0 errors)" in text


def test_an_interrupted_experiment_is_marked_partial(
    tmp_path: Path, blocks: list[BlockResult]
) -> None:  # noqa: ANN001
    cut = [
        *blocks[:5],
        BlockResult(
            5, "A", "step8", "op-5", "", 12.0, {60: {"output_tok_s": math.nan}}, complete=False
        ),
    ]
    _write(tmp_path, cut, [], interrupted="Ctrl-C during block 5")
    r = json.loads((tmp_path / "report.json").read_text())  # strict JSON: the NaN is null
    assert r["partial"] is True and r["interrupted"] == "Ctrl-C during block 5"
    assert r["blocks"][5]["values"]["60"]["output_tok_s"] is None and r["decision"]["winner"] == "A"
    md = (tmp_path / "report.md").read_text()
    assert (
        "**PARTIAL**: Ctrl-C during block 5" in md and "| 5 | A | step8 |" in md and "| NO |" in md
    )


def test_without_matplotlib_the_text_reports_are_still_written(
    tmp_path: Path, blocks: list[BlockResult], monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    written = _write(tmp_path, blocks, [])
    assert [p.name for p in written] == ["report.json", "report.md"]


def test_drift_and_a_naive_order_are_called_out_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    from dsv4ops.ab.schedule import naive

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    arms: dict[Arm, ArmModel] = {
        "A": ArmModel("step8", tuple(STEP8)),
        "B": ArmModel("step4", tuple(STEP4)),
    }
    blocks = TwinBlocks(arms, concurrencies=(60,), steps=50, drift_pct_per_min=0.3).run(naive(12))
    an = analyse(blocks)
    write_report(
        tmp_path,
        a="step8",
        b="step4",
        schedule=naive(12),
        blocks=blocks,
        analysis=an,
        gates=[],
        decision=decide(an, []),
    )
    md = (tmp_path / "report.md").read_text()
    assert "A's values drifted over the experiment" in md and "output_tok_s@60" in md
    assert "Note: the schedule is not counterbalanced" in md


def test_a_partial_run_with_one_arm_writes_its_plots_without_warnings(
    tmp_path: Path, blocks: list[BlockResult]
) -> None:  # noqa: ANN001
    """One A block and no B yet (interrupted at once): no pair, no ratio; matplotlib must not warn
    "No artists with labels found to put in legend" about the empty panel (issue 23)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = _write(tmp_path, blocks[:1], [], interrupted="Ctrl-C during block 1")
    assert not [w for w in caught if "No artists" in str(w.message)], [
        str(w.message) for w in caught
    ]
    assert "curves.png" in {p.name for p in written}
