from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dsv4ops.canary.report import report_json, report_markdown, write_report
from dsv4ops.canary.runner import combined
from dsv4ops.canary.verdict import Findings, Kind, SuiteResult, Thresholds, Verdict
from dsv4ops.jsontypes import JSONObject
from testing.canary import judged_pass, reason_kinds


def _summary(completed: int) -> JSONObject:
    return {
        "completed": completed,
        "failed": 0,
        "output_throughput": 700.0,
        "median_ttft_ms": 40.0,
        "p99_itl_ms": math.nan,
        "request_throughput": 3.0,
        "output_tokens_per_s_buckets": [5, 9],
    }


def _all() -> SuiteResult:
    smoke = SuiteResult("smoke", Verdict.PASS, ["note: ok"], {"summary": _summary(8)})
    sweep = SuiteResult(
        "sweep",
        Verdict.FAIL,
        ["FAIL: hang"],
        {
            "summary": _summary(40),
            "levels": [
                {
                    "concurrency": c,
                    "bs": float(c),
                    "step_ms": 18 + 1.05 * p,
                    "output_tok_s": 1000 * c / (18 + 1.05 * p),
                    "step_ms_metrics": None,
                    "output_tok_s_metrics": None,
                }
                for c, p in ((32, 32), (56, 56), (57, 64), (64, 64))
            ],
            "buckets": [32, 40, 48, 56, 64],
            "fit": {
                "padded_bs": {
                    "a_ms": 18.0,
                    "b_ms": 1.05,
                    "r2": 1.0,
                    "n": 4,
                    "x": "padded_bs",
                    "ceiling_tok_s": 952.4,
                }
            },
            "padding_waste": [
                {
                    "bucket": 64,
                    "lo": 57,
                    "worst_padded_slots": 7,
                    "worst_waste_pct": 8.6,
                    "observed_padding_pct": 10.9,
                }
            ],
        },
    )
    return SuiteResult("all", Verdict.FAIL, ["sweep: FAIL"], {}, [smoke, sweep])


def test_report_json_uses_bench_serving_keys_from_the_biggest_suite() -> None:
    data = report_json(_all(), Thresholds())
    assert data["completed"] == 40 and data["output_throughput"] == 700.0
    assert data["p99_itl_ms"] is None  # NaN → null: strict JSON
    assert data["verdict"] == "FAIL" and [s["suite"] for s in data["canary"]["suites"]] == [
        "smoke",
        "sweep",
    ]
    json.dumps(data, allow_nan=False)


def test_write_report_creates_markdown_and_plots(tmp_path: Path) -> None:
    paths = write_report(_all(), tmp_path / "out")
    names = sorted(p.name for p in paths)
    assert names == sorted(
        [
            "report.json",
            "report.md",
            "smoke-latency.png",
            "smoke-throughput.png",
            "sweep-sweep.png",
            "sweep-latency.png",
            "sweep-throughput.png",
        ]
    )
    md = (tmp_path / "out" / "report.md").read_text()
    assert "# Canary `all`: **FAIL**" in md and "| padded_bs | 18.00 | 1.050 |" in md
    assert "![sweep-sweep.png](sweep-sweep.png)" in md


def test_markdown_of_a_single_suite() -> None:
    md = report_markdown(SuiteResult("smoke", Verdict.PASS, ["note: ok"], {"summary": _summary(8)}))
    assert md.count("note: ok") == 1 and "| ttft |" in md


def test_report_says_whose_numbers_and_counts_cancellations_apart() -> None:
    data = report_json(_all(), Thresholds())
    assert data["suite"] == "all" and data["summary_suite"] == "sweep"
    s = {
        **_summary(48),
        "cancelled": 96,
        "completed_without_done": 5,
        "errors_by_kind": {"truncated": 2},
        "failed": 2,
    }
    md = report_markdown(SuiteResult("sweep", Verdict.PASS, [], {"summary": s}))
    assert "| completed | cancelled | failed |" in md and "| 48 | 96 | 2 |" in md
    assert "Cancelled: 96 streams cut on purpose" in md
    assert "5 completed streams ended after their finish_reason without `data: [DONE]`" in md
    assert "Errors: truncated 2" in md


def test_a_sweep_report_records_the_decode_context_length_its_law_holds_at(tmp_path: Path) -> None:
    """sglang#40442: the DSV4 decode graph width follows --context-length, so the sweep's report
    says the decode's context (and whether it was set), and `buckets plan --from` reads it."""
    from dsv4ops.buckets.sources import from_report

    metrics: JSONObject = {
        "levels": [
            {"concurrency": c, "bs": float(c), "duration_s": 5.0, "step_ms": 18.0 + 1.05 * c}
            | {"step_ms_metrics": None, "output_tok_s": c * 1000 / (18.0 + 1.05 * c)}
            for c in (32, 48)
        ],
        "fit": {"bs": {"a_ms": 18.0, "b_ms": 1.05, "r2": 0.99, "ceiling_tok_s": 952.0}},
        "decode_context": {"context_length": 131072, "explicit": True},
    }
    result = SuiteResult("sweep", Verdict.PASS, metrics=metrics)
    md = report_markdown(result)
    assert "Decode context length: 131072 (set by --context-length)" in md
    assert "sglang#40442" in md
    unset = {**metrics, "decode_context": {"context_length": 1048576, "explicit": False}}
    assert "1048576 (the model's own: no --context-length)" in report_markdown(
        SuiteResult("sweep", Verdict.PASS, metrics=unset)
    )
    (tmp_path / "report.json").write_text(json.dumps(report_json(result)))
    assert from_report(tmp_path).decode_context_length == 131072


def test_report_json_types_each_reason_by_its_kind() -> None:
    """Issue 38: a reader (the real judges test, a gate) acts on each reason's kind, decided by
    the judge that wrote it, and never parses the words; under `all` each names its suite."""
    smoke, sweep = Findings(), Findings()
    smoke.unsure("event-loop lag p99 300 ms (limit 250 ms)", Kind.CLIENT_LAG)
    smoke.note("the server refused 1 of 8 requests (HTTP 400 x1)", Kind.REFUSED)
    sweep.unsure("no step law from this sweep (slope -2.7 ms/request)", Kind.NO_STEP_LAW)
    result = combined([smoke.result("smoke", {}), sweep.result("sweep", {})])
    assert result.reasons == [
        "smoke: INCONCLUSIVE",
        "sweep: INCONCLUSIVE",
        "smoke: INCONCLUSIVE: event-loop lag p99 300 ms (limit 250 ms)",
        "sweep: INCONCLUSIVE: no step law from this sweep (slope -2.7 ms/request)",
    ]
    data = json.loads(json.dumps(report_json(result)))
    assert [(f["suite"], f["level"], f["kind"]) for f in data["findings"]] == [
        ("smoke", "INCONCLUSIVE", "client_lag"),
        ("sweep", "INCONCLUSIVE", "no_step_law"),
    ]
    # each suite's own report (and `canary --json`) carries its notes typed as well
    smoke_json = data["canary"]["suites"][0]
    assert [f["kind"] for f in smoke_json["findings"]] == ["client_lag", "refused"]
    assert [f["reason"] for f in smoke_json["findings"]] == smoke_json["reasons"]


def test_the_real_judges_test_reads_the_typed_kinds_of_a_json_report() -> None:
    """testing.canary.judged_pass (tests/canary/real_sglang_judges_test.py) on what `canary
    --json` prints (SuiteResult.to_json): PASS, or INCONCLUSIVE for measurement doubts only."""

    def report(*found: tuple[str, Kind]) -> dict[str, Any]:
        f = Findings()
        for level, kind in found:
            (f.unsure if level == "INCONCLUSIVE" else f.note)(f"words of {kind.value}", kind)
        doc: dict[str, Any] = json.loads(json.dumps(f.result("smoke", {}).to_json()))
        return doc

    assert judged_pass(report())
    assert judged_pass(report(("INCONCLUSIVE", Kind.CLIENT_LAG), ("INCONCLUSIVE", Kind.POOR_FIT)))
    assert judged_pass(report(("INCONCLUSIVE", Kind.NO_STEP_LAW), ("note", Kind.NOTE)))
    assert not judged_pass(report(("INCONCLUSIVE", Kind.REFUSED)))
    assert not judged_pass(report(("INCONCLUSIVE", Kind.CLIENT_LAG), ("INCONCLUSIVE", Kind.BLIND)))
    # a hang the client could not confirm is no measurement doubt; a few refusals are a note
    assert not judged_pass(report(("INCONCLUSIVE", Kind.HANG)))
    noted = report(("note", Kind.REFUSED))
    assert judged_pass(noted) and reason_kinds(noted) == ["refused"]
    assert reason_kinds(noted, "INCONCLUSIVE") == []
    failed = Findings()
    failed.fail("hang: 16 stall", Kind.HANG)
    got = failed.result("soak", {}).to_json()
    assert not judged_pass(got) and reason_kinds(got, "FAIL") == ["hang"]
