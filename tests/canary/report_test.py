from __future__ import annotations

import json
import math
from pathlib import Path

from dsv4ops.canary.report import report_json, report_markdown, write_report
from dsv4ops.canary.verdict import SuiteResult, Thresholds, Verdict
from dsv4ops.jsontypes import JSONObject


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
