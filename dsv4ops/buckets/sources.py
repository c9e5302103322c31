"""Where the observed batch-size distribution and the step law come from.

0.5.23 has no batch-size histogram: the distribution is built from samples of the decode's
`sglang:num_running_reqs` (a live target, sampled over a window), a canary/A-B report's levels
(the server's median running batch per level, each level weighted by its duration), or a JSON
file (`{"size": weight, ...}` or a list of samples). A report's levels are a staircase the
canary chose, not traffic: below its lowest level it says nothing (the CLI keeps the profile's
own buckets there rather than planning them away).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from dsv4ops.buckets.plan import StepLaw
from dsv4ops.errors import DsOpsError
from dsv4ops.jsontypes import JSONObject, JSONValue
from dsv4ops.localfiles import FileRefused, read_regular

# A sweep or A/B report is tens of KB, a distribution file a list of samples: a window of a
# day's 1 s samples is ~0.5 MB. Anything larger was named by mistake.
MAX_INPUT_BYTES = 64 * 1024 * 1024


def _read_json(path: Path) -> JSONValue:
    try:
        # a pipe too: `--distribution <(promtool query ... | jq ...)`
        data = read_regular(path, MAX_INPUT_BYTES, "input", pipe_ok=True)
        return json.loads(data.decode("utf-8"))
    except FileRefused as exc:
        raise DsOpsError(f"{path}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DsOpsError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DsOpsError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None


def from_file(path: Path) -> dict[int, float]:
    data = _read_json(path)
    try:
        if isinstance(data, list):
            return dict(Counter(int(x) for x in data))
        if isinstance(data, dict):
            return {int(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError):
        pass
    raise DsOpsError(f'{path}: expected a list of running batch sizes or {{"size": weight}}')


@dataclass(frozen=True)
class ReportLevels:
    """What a report says about the running batch: the distribution over its levels, the law it
    fitted, and where both came from (a sentence for the user)."""

    counts: dict[int, float]
    law: StepLaw | None
    source: str
    # A staircase of levels the canary chose, not traffic: it says nothing below its lowest level.
    staircase: bool = True
    # The decode's context length the sweep ran at (None: not recorded): the DSV4 decode graph
    # width follows it (sglang#40442), so the law holds at that context.
    decode_context_length: int | None = None


# dsv4ops.ab's FIT_LEVEL: a block's fitted law sits under this key of `values` (buckets and ab
# are areas of one layer, so the report format is read, not imported).
AB_FIT_LEVEL = "0"
_NO_LEVELS_HINT = (
    "give --from the report.json of `dsv4ops canary --suite sweep --report DIR` "
    "or of `dsv4ops ab ... --suite sweep`"
)


def _report_file(path: Path) -> Path:
    """The report.json in a --report directory (what the operator has at hand), else `path`."""
    if not path.is_dir():
        return path
    if not (path / "report.json").is_file():
        raise DsOpsError(f"{path}: a directory without report.json", hint=_NO_LEVELS_HINT)
    return path / "report.json"


def from_report(path: Path) -> ReportLevels:
    """The sweep levels of a report.json and its fitted law: a canary report (the sweep's result
    under `canary.suites[]`, as `canary --suite sweep --report` writes it) or an A/B report
    (`kind: ab`: its blocks' levels, the law of the arm it kept). `path` may be the --report
    directory that holds report.json (what the operator has at hand). Raises DsOpsError."""
    path = _report_file(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DsOpsError(f"{path}: not a report (expected a JSON object)", hint=_NO_LEVELS_HINT)
    if data.get("kind") == "ab":
        return _from_ab(path, data)
    suites = (
        (data.get("canary") or {}).get("suites") if isinstance(data.get("canary"), dict) else None
    )
    sweep = next(
        (s for s in suites or [] if isinstance(s, dict) and s.get("suite") == "sweep"), None
    )
    metrics = sweep.get("metrics") if isinstance(sweep, dict) else None
    levels = metrics.get("levels") if isinstance(metrics, dict) else None
    if not levels or not isinstance(metrics, dict):
        raise DsOpsError(
            f"{path}: no sweep levels in this report (no canary.suites[] entry of "
            "suite sweep with metrics.levels)",
            hint=_NO_LEVELS_HINT,
        )
    dist: dict[int, float] = {}
    try:
        for lv in levels:
            bs = lv.get("bs") or lv.get("concurrency")
            if bs and float(bs) >= 1:
                n = round(float(bs))
                dist[n] = dist.get(n, 0.0) + float(lv.get("duration_s", 1.0) or 1.0)
    except (AttributeError, TypeError, ValueError):
        raise DsOpsError(
            f"{path}: canary.suites[sweep].metrics.levels: expected a list of "
            '{"bs": running, ...} objects',
            hint=_NO_LEVELS_HINT,
        ) from None
    fit = metrics.get("fit", {})
    ctx = _decode_context(metrics.get("decode_context"))
    for key in ("metrics", "padded_bs", "bs"):
        law = _law(fit.get(key) if isinstance(fit, dict) else None, "a_ms", "b_ms")
        if law is not None:
            how = f"canary sweep levels; law fitted from fit.{key}"
            return ReportLevels(dist, law, how, decode_context_length=ctx)
    return ReportLevels(dist, None, "canary sweep levels; no fitted law", decode_context_length=ctx)


def _decode_context(recorded: object) -> int | None:
    """The decode context length a sweep recorded (canary/suites/sweep.py), else None."""
    value = recorded.get("context_length") if isinstance(recorded, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_ab(path: Path, data: JSONObject) -> ReportLevels:
    """An A/B report: each level (concurrency) weighted by the blocks' measured time, the law the
    kept arm's blocks fitted (median of their step_a_ms / step_b_ms)."""
    winner = (data.get("decision") or {}).get("winner") or "A"
    dist: dict[int, float] = {}
    a_ms: list[float] = []
    b_ms: list[float] = []
    for blk in data.get("blocks") or []:
        values = blk.get("values") if isinstance(blk, dict) else None
        if not isinstance(values, dict):
            continue
        levels = [int(c) for c in values if str(c).isdigit() and int(c) >= 1]
        for c in levels:
            dist[c] = dist.get(c, 0.0) + float(blk.get("duration_s") or 1.0) / len(levels)
        fitted = values.get(AB_FIT_LEVEL) or {}
        if (
            blk.get("arm") == winner
            and isinstance(fitted, dict)
            and _law(fitted, "step_a_ms", "step_b_ms")
        ):
            a_ms.append(float(fitted["step_a_ms"]))
            b_ms.append(float(fitted["step_b_ms"]))
    if not dist:
        raise DsOpsError(f"{path}: no levels in this A/B report's blocks", hint=_NO_LEVELS_HINT)
    law = StepLaw(statistics.median(a_ms), statistics.median(b_ms)) if a_ms else None
    how = (
        f"the law of arm {winner} (kept), median of {len(a_ms)} blocks" if law else "no fitted law"
    )
    return ReportLevels(dist, law, f"A/B report levels (concurrency); {how}")


def _law(fit: object, a_key: str, b_key: str) -> StepLaw | None:
    if not isinstance(fit, dict):
        return None
    a, b = fit.get(a_key), fit.get(b_key)
    if not isinstance(a, int | float) or not isinstance(b, int | float) or b <= 0:
        return None
    return StepLaw(float(a), float(b))


def parse_law(text: str) -> StepLaw:
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise DsOpsError(f"--law {text!r}: expected A_MS,B_MS (e.g. 18,1.05)") from None
    if not (0 <= a < 10_000 and 0 < b < 1_000):
        raise DsOpsError(f"--law {text!r}: a from 0 to 10000 ms, b above 0 and below 1000 ms")
    return StepLaw(a, b)
