"""The report directory: report.json (bench_serving key names at the top level), report.md (a
human summary with tables) and PNG plots (`dsv4ops.canary.plots`, matplotlib imported lazily)."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dsv4ops.canary.stats import clean_json
from dsv4ops.canary.verdict import SuiteResult, Thresholds
from dsv4ops.errors import CanaryError
from dsv4ops.jsontypes import JSONObject

LATENCY_ROWS = ("ttft", "itl", "tpot", "e2e_latency")


def report_json(result: SuiteResult, thresholds: Thresholds | None = None) -> JSONObject:
    """bench_serving's keys (`output_throughput`, `median_ttft_ms`, `p99_itl_ms`, ...) at the top
    level, taken from the suite with the most completed requests (named by `summary_suite`); the
    canary's own under `canary`."""
    suites = result.sub_results or [result]
    main = max(suites, key=lambda r: (r.metrics.get("summary") or {}).get("completed", -1))
    summary = dict(main.metrics.get("summary") or {})
    summary.pop("output_tokens_per_s_buckets", None)
    canary: dict[str, object] = {"suites": [r.to_json() for r in suites]}
    if thresholds is not None:
        canary["thresholds"] = thresholds.to_json()
    data: dict[str, object] = {
        **summary,
        "tag": f"dsv4ops-canary:{result.suite}",
        "suite": result.suite,
        "summary_suite": main.suite,  # whose numbers the bench_serving keys above are
        "verdict": result.verdict.value,
        "reasons": result.reasons,
        # each reason's kind, as the judge decided it (verdict.Kind): what a reader acts on
        "findings": [r.to_json() for r in result.findings],
        "canary": canary,
    }
    cleaned: JSONObject = clean_json(data)
    return cleaned


def prepare_report_dir(directory: Path) -> None:
    """Make `directory` and prove a file can be written in it, before any load is sent: found
    only after the run, an unwritable report lost the run and its verdict (a soak's hours).
    Raises CanaryError."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        why = "not a directory" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise CanaryError(
            f"cannot write the report to {directory}: {why}; nothing was sent",
            hint="give --report a directory you can write (it is made if missing)",
        ) from None


def write_report(
    result: SuiteResult, directory: Path, *, thresholds: Thresholds | None = None
) -> list[Path]:
    """Write report.json, report.md and the plots; returns the paths written.

    Raises CanaryError if the directory cannot be written.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        written = [directory / "report.json", directory / "report.md"]
        written[0].write_text(json.dumps(report_json(result, thresholds), indent=2) + "\n")
        from dsv4ops.canary.plots import write_plots

        pngs = write_plots(result, directory)
        written[1].write_text(report_markdown(result, [p.name for p in pngs]))
    except OSError as exc:
        raise CanaryError(f"cannot write the report to {directory}: {exc.strerror}") from None
    return written + pngs


def _fmt(value: object, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _count_notes(s: Mapping[str, object]) -> list[str]:
    """What the counts above include, where it is not obvious, and the failures by kind."""
    lines = []
    if s.get("cancelled"):
        lines += [
            "",
            f"Cancelled: {s['cancelled']} streams cut on purpose by the canary (not failures); "
            "their tokens are in output tok/s, their first token and gaps in TTFT and ITL.",
        ]
    if s.get("completed_without_done"):
        lines += [
            "",
            f"{s['completed_without_done']} completed streams ended after their finish_reason "
            "without `data: [DONE]`.",
        ]
    errors = s.get("errors_by_kind")
    if isinstance(errors, Mapping) and errors:
        lines += ["", "Errors: " + ", ".join(f"{k} {v}" for k, v in errors.items())]
    return lines


def report_markdown(result: SuiteResult, pngs: list[str] | None = None) -> str:
    lines = [f"# Canary `{result.suite}`: **{result.verdict.value}**"]
    if result.sub_results:
        lines += [""] + [f"- {r}" for r in result.reasons]
    for r in result.sub_results or [result]:
        lines += ["", f"## {r.suite}: {r.verdict.value}", ""]
        if r.sub_results:
            continue
        lines += [f"- {line}" for line in r.reasons]
        lines += _summary_md(r.metrics.get("summary") or {})
        lines += _decode_context_md(r.metrics.get("decode_context"))
        lines += _fits_md(r.metrics)
        lines += _levels_md(r.metrics.get("levels") or [])
        lines += _waste_md(r.metrics.get("padding_waste") or [])
        lines += _client_md(r.metrics.get("client") or {})
    if pngs:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    return "\n".join(lines) + "\n"


def _summary_md(s: Mapping[str, object]) -> list[str]:
    """The client's wall-clock summary and latency table ([] without a summary)."""
    if not s:
        return []
    lines = [
        "",
        "Client wall clock:",
        "",
        "| completed | cancelled | failed | output tok/s | req/s | max tok/s (1 s) "
        "| concurrency |",
        "|---|---|---|---|---|---|---|",
        f"| {s.get('completed')} | {s.get('cancelled', 0)} | {s.get('failed')} "
        f"| {_fmt(s.get('output_throughput'))} "
        f"| {_fmt(s.get('request_throughput'), 2)} | {_fmt(s.get('max_output_tokens_per_s'))} "
        f"| {_fmt(s.get('concurrency'), 2)} |",
        "",
        "| latency (ms) | mean | median | p90 | p99 | max |",
        "|---|---|---|---|---|---|",
    ]
    for name in LATENCY_ROWS:
        lines.append(
            f"| {name} | "
            + " | ".join(
                _fmt(s.get(f"{stat}_{name}_ms")) for stat in ("mean", "median", "p90", "p99", "max")
            )
            + " |"
        )
    return lines + _count_notes(s)


def _decode_context_md(ctx: object) -> list[str]:
    """The decode's context length the sweep ran at: its law holds there only (sglang#40442)."""
    if not isinstance(ctx, dict):
        return []
    length = ctx.get("context_length")
    explicit = ctx.get("explicit")
    how = (
        "set by --context-length"
        if explicit is True
        else "the model's own: no --context-length"
        if explicit is False
        else "not reported"
    )
    return [
        "",
        f"Decode context length: {_fmt(length)} ({how}); the DSV4 decode graph width follows it "
        "(sglang#40442), so the law below holds at this context.",
    ]


def _fits_md(metrics: Mapping[str, object]) -> list[str]:
    """The clock the levels and fits are on, and the fits' table."""
    fit = metrics.get("fit")
    fit = fit if isinstance(fit, Mapping) else {}
    clock = metrics.get("clock")
    clock = clock if isinstance(clock, Mapping) else {}
    lines: list[str] = []
    if clock and (fit or metrics.get("levels")):
        lines += [
            "",
            f"Levels and fits on the {clock.get('name')} clock, time scale "
            f"{clock.get('time_scale'):g}: {clock.get('note')}.",
        ]
    if fit:
        lines += [
            "",
            "| fit | a (ms) | b (ms/req) | R² | ceiling 1000/b (tok/s) |",
            "|---|---|---|---|---|",
        ]
        for name, f in fit.items():
            lines.append(
                f"| {name} | {_fmt(f['a_ms'], 2)} | {_fmt(f['b_ms'], 3)} | {_fmt(f['r2'], 4)} "
                f"| {_fmt(f['ceiling_tok_s'], 0)} |"
            )
    return lines


def _levels_md(levels: list[Mapping[str, object]]) -> list[str]:
    if not levels:
        return []
    return [
        "",
        "| concurrency | step (ms) | step from metrics (ms) | output tok/s |",
        "|---|---|---|---|",
    ] + [
        f"| {p['concurrency']} | {_fmt(p['step_ms'], 2)} | {_fmt(p['step_ms_metrics'], 2)} "
        f"| {_fmt(p['output_tok_s'], 0)} |"
        for p in levels
    ]


def _waste_md(waste: list[Mapping[str, object]]) -> list[str]:
    if not waste:
        return []
    return [
        "",
        "| bucket | smallest batch | worst padded slots | worst step waste % | observed padding % |",
        "|---|---|---|---|---|",
    ] + [
        f"| {w['bucket']} | {w['lo']} | {w['worst_padded_slots']} | {_fmt(w['worst_waste_pct'])} "
        f"| {_fmt(w['observed_padding_pct'])} |"
        for w in waste
    ]


def _client_md(client: Mapping[str, object]) -> list[str]:
    if not client:
        return []
    busy = client.get("machine_cpu_busy") or 0
    return [
        "",
        f"Client: {_fmt(client.get('client_cpu_cores'), 2)} cores, loop lag p99 "
        f"{_fmt(client.get('loop_lag_p99_ms'))} ms, machine CPU busy "
        f"{_fmt(busy * 100 if isinstance(busy, int | float) else busy, 0)}%"
        + (" — CLIENT-BOUND" if client.get("client_bound") else ""),
    ]
